"""Shared blocks: each scenario's system prompt, tool catalog, repo map, guidelines and API docs.

Composed once per run, tokenized once, serialized once, then reused by reference in every span. Each scenario
draws its own repository, so no scenario's prefix is a prefix of another's (a benchmark that runs them back to
back on one server must not get cache hits across scenarios).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .content.budget import compose_block, file_sections
from .content.compose import Composer, Text
from .content.vocab import Vocab
from .messages import Message, system, user
from .streams import agent_rng, catalog_rng
from .tools import ToolCatalog, build_catalog

__all__ = ["ScenarioBlocks", "CatalogStage", "catalog_stage", "build_blocks"]

_AGENTS = ("Forge", "Patchwork", "Keystone", "Tessera", "Lattice", "Quill", "Harbor", "Cinder")


@dataclass(frozen=True)
class ModuleFiles:
    """A module of the monorepo: the files every session on it reads first (scenario 3)."""

    path: str
    core: Text


@dataclass(frozen=True)
class ScenarioBlocks:
    repo: str
    catalog: ToolCatalog
    system: Message
    repo_map: Message
    guidelines: Message | None = None
    api_docs: Message | None = None
    modules: tuple[ModuleFiles, ...] = ()
    subagent_system: Message | None = None  # every sub-agent's system prompt, the same in every session


def _system_prompt(composer: Composer, v: Vocab, repo: str, budget: int, rng, *, seed: int, scenario_id: int) -> Text:
    # one draw per seed, then a different agent per scenario: the prompts differ from their first token
    first = int(agent_rng(seed).integers(len(_AGENTS)))
    agent = _AGENTS[(first + scenario_id) % len(_AGENTS)]
    header = (
        f"You are {agent}, an autonomous software engineering agent working in the {repo} repository, "
        f"owned by the {v.team()} team. Read code before changing it, keep patches minimal, run the tests you "
        f"touch, and explain what you changed and why. Follow these rules:\n"
    )
    return compose_block(composer, header, "guideline", budget, rng)


def _subagent_prompt(composer: Composer, v: Vocab, repo: str, budget: int, rng) -> Text:
    header = (
        f"You are a sub-agent working in the {repo} repository on one task the main agent gave you. You cannot ask "
        "it questions: use the tools, then end with a report of what you found, citing files and lines.\n"
    )
    return compose_block(composer, header, "guideline", budget, rng)


@dataclass(frozen=True)
class CatalogStage:
    """The first stage of a scenario's blocks: its repository name and tool catalog, and the RNG stream (with the
    vocabulary drawing from it) as the rest of the blocks continue it. Sizing the catalog re-encodes it many times,
    the slowest part of the blocks, and needs no content pool: so it can be built in another process and handed back
    (the generator and vocabulary pickle together, state and all). build_blocks draws on, so a stage serves once."""

    repo: str
    catalog: ToolCatalog
    rng: np.random.Generator
    vocab: Vocab


def catalog_stage(tokenizer, sc_spec, *, scenario_id: int, seed: int) -> CatalogStage:
    rng = catalog_rng(seed, scenario_id)
    v = Vocab(rng)
    repo = f"{v.team()}-{v.noun()}-{v.noun()}"
    catalog = build_catalog(tokenizer, repo=repo, budget=sc_spec.tools, rng=rng, delegate=sc_spec.spawns_subagents)
    return CatalogStage(repo, catalog, rng, v)


def build_blocks(
    composer: Composer, sc_spec, *, scenario_id: int, seed: int, stage: CatalogStage | None = None
) -> ScenarioBlocks:
    """The shared blocks of one scenario, from its own RNG stream (continuing `stage`, if it was built already)."""
    stage = stage or catalog_stage(composer.tokenizer, sc_spec, scenario_id=scenario_id, seed=seed)
    repo, catalog, rng, v = stage.repo, stage.catalog, stage.rng, stage.vocab
    sys_text = _system_prompt(composer, v, repo, sc_spec.system, rng, seed=seed, scenario_id=scenario_id)
    repo_map = compose_block(
        composer, f"Repository map of {repo} (tree -L 3, generated files omitted):\n", "tree", sc_spec.repo_map, rng
    )
    if not hasattr(sc_spec, "guidelines"):
        subagent_system = None
        if sc_spec.spawns_subagents:  # drawn after the rest: a workload without sub-agents keeps its bytes
            subagent_system = system(_subagent_prompt(composer, v, repo, sc_spec.subagent_system, rng))
        return ScenarioBlocks(repo, catalog, system(sys_text), user(repo_map), subagent_system=subagent_system)
    guidelines = user(
        compose_block(composer, f"# {repo} engineering guidelines\n", "guideline", sc_spec.guidelines, rng)
    )
    api_docs = user(compose_block(composer, f"# {repo} internal API reference\n", "api_doc", sc_spec.api_docs, rng))
    modules = tuple(_module_files(composer, sc_spec, v, rng) for _ in range(sc_spec.modules))
    return ScenarioBlocks(repo, catalog, system(sys_text), user(repo_map), guidelines, api_docs, modules)


def _module_files(composer: Composer, sc_spec, v: Vocab, rng) -> ModuleFiles:
    """A module's shared files, sized so they are 20-40% of any workspace a session builds on them."""
    mid = (sc_spec.shared_workspace_percent.lo + sc_spec.shared_workspace_percent.hi) / 200
    size = int(rng.integers(int(sc_spec.workspace.lo * mid), int(sc_spec.workspace.hi * mid) + 1))
    path = f"services/{v.noun()}_{v.noun()}"
    core = file_sections(
        composer,
        rng,
        header=f"Workspace {path}/ (module files first, then your open files):\n",
        budget=size,
        files=int(rng.integers(2, 5)),
    )
    return ModuleFiles(path, core)
