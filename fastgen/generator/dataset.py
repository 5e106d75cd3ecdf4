"""The dataset as pure functions: which files exist, and the bytes of each.

A `DatasetBuilder` holds what one process needs to make any session: the tokenizer, the content pools, and each
scenario's shared blocks (built lazily, once). `files_for(task)` returns the files of one session index (one per
layout of its scenario: scenarios 2 and 3 write two from the same content), so a worker builds the content once and
writes all of them. Which scenarios there are is the spec's business (fastgen.generator.scenarios); nothing here names one.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable

import xxhash

from .shared_blocks import CatalogStage, ScenarioBlocks, build_blocks, catalog_stage
from ..formats.chat_template import SHIPPED_DIR, SHIPPED_TEMPLATES, ChatTemplate
from .content.compose import Composer
from .content.kinds import KINDS
from .model_match import family_of
from .pool_cache import PoolCache, facts_key
from .scenarios import in_spec, layouts, scenario_by_id
from .prompt_tokens import PromptCount, TemplateCount, measured_margin, prompt_count
from .spans import session_chunks
from .spec import Spec, TemplateMargin
from ..formats.tokenizer import Tokenizer


__all__ = [
    "Task",
    "directories",
    "files_per_task",
    "tasks",
    "DatasetBuilder",
    "check_fits",
    "file_name",
    "Piece",
    "pieces",
]

# The independent pieces of DatasetBuilder.prepare(): one content pool per kind, one catalog stage per scenario.
# Listed roughly slowest first (measured with the built-in tokenizer), so a pool of workers that takes them in order
# ends on short ones; the order changes no byte of the output.
Piece = tuple[str, Any]  # ("pool", kind: str) or ("stage", scenario id: int)
_SLOWEST_POOLS_FIRST = ("code", "prose", "api_doc", "tree")


def pieces(spec: Spec) -> tuple[Piece, ...]:
    return (
        *(("pool", kind) for kind in _SLOWEST_POOLS_FIRST),
        *(("catalog", s.id) for s in in_spec(spec)),
        *(("pool", kind) for kind in KINDS if kind not in _SLOWEST_POOLS_FIRST),
    )


@dataclass(frozen=True, order=True)
class Task:
    scenario_id: int
    index: int


def directories(spec: Spec) -> tuple[str, ...]:
    """The trace directories a run of `spec` writes."""
    return layouts(spec)


def files_per_task(task: Task) -> int:
    return len(scenario_by_id(task.scenario_id).layouts)


def tasks(spec: Spec) -> list[Task]:
    """Every session index of every scenario, the last scenario first (the design's largest files: a pool's last
    tasks are then short ones)."""
    return [Task(s.id, i) for s in reversed(in_spec(spec)) for i in range(s.spec(spec).count)]


def file_name(index: int) -> str:
    return f"session_{index:04d}.json"


def check_fits(spec: Spec) -> None:
    """Refuse, before writing anything, a spec whose largest request cannot fit the context window."""
    for scenario in in_spec(spec):
        for request in scenario.largest_requests(spec):
            over = spec.tokens_over_window(request.prompt_tokens, request.max_tokens, request.messages)
            if over > 0:
                raise spec.window_too_small(request.what, over, lower="the budgets (--budget-scale)")


def _shipped_count(tokenizer: Tokenizer, name: str) -> TemplateCount:
    """Counts as the shipped template `name` renders prompts, with the tokenizer's vocabulary (its special tokens
    where it has them: a marker it lacks counts as several tokens, which only widens the margin), by whole
    renderings: only a few first sessions are rendered, and a template that escapes contents (llama3) does not
    decompose."""
    source = (SHIPPED_DIR / f"{name}.jinja").read_bytes()
    files = {**tokenizer.folder_files, "chat_template.jinja": source}
    template = ChatTemplate.of(files)
    assert template is not None  # it has one now
    return TemplateCount(tokenizer, template, whole=True)


# Sessions of each scenario a template the tokenizer lacks is measured on: a template that escapes what it shows
# (llama3's tool results) adds more where results are larger, so more than the first session's are sampled.
_ASSUMED_SAMPLES = 8


def _widest(a: TemplateMargin, b: TemplateMargin) -> TemplateMargin:
    return TemplateMargin(max(a.base, b.base), max(a.per_message, b.per_message))


class DatasetBuilder:
    def __init__(self, tokenizer: Tokenizer, spec: Spec, *, seed: int, model: str, count: str = "auto"):
        """`count`: how spans' input_tokens are counted (prompt_tokens.prompt_count: template, content, auto)."""
        self.spec = spec
        self.seed = seed
        self.model = model
        self.composer = Composer(tokenizer, seed)
        self.count: PromptCount = prompt_count(tokenizer, count)
        self._blocks: dict[int, ScenarioBlocks] = {}
        self._stages: dict[int, CatalogStage] = {}  # built by prepare(), consumed by blocks()

    def prepare(
        self,
        build_pieces: Callable[[list[Piece]], list] | None = None,
        cache: PoolCache | None = None,
        *,
        mark: Callable[[str], None] = lambda phase: None,
    ) -> "DatasetBuilder":
        """Build every pool and shared block now (and escape them), so forked workers inherit them ready.

        Most of this time goes to pieces(spec), independent of each other: `build_pieces` may build them in other processes
        (workers.build_pieces), in any order, and return the results in the order given. Pools found in `cache` are
        not built, and the pools built are stored there. `mark` is told as each phase ends (timeline.py).
        """
        todo = list(pieces(self.spec))
        cached = {key: cache.load(key) for what, key in todo if what == "pool"} if cache is not None else {}
        todo = [(what, key) for what, key in todo if cached.get(key) is None]
        results = (build_pieces or self._build_here)(todo) if todo else []
        for (what, key), result in zip(todo, results, strict=True):
            if what == "pool":
                cached[key] = result
                if cache is not None:
                    cache.store(key, result)
            else:
                self._stages[key] = result
        for kind, pool in cached.items():
            assert pool is not None  # one the cache lacked was built above
            self.composer.adopt_pool(kind, pool)
        if cache is not None:
            cache.trim()
        mark("pools")
        for scenario in in_spec(self.spec):
            blocks = self.blocks(scenario.id)
            _ = blocks.catalog.escaped  # cached properties: computed here, once, before any fork
            for message in (blocks.system, blocks.repo_map, blocks.guidelines, blocks.api_docs):
                if message is not None:
                    _ = message.escaped
        mark("shared blocks")
        key = self._facts_key()
        if not self._adopt_facts(cache.load_facts(key) if cache is not None else None):
            self._prove_count()
            mark("count proof")
            self._measure_margin()
            mark("margin")
            if cache is not None:
                cache.store_facts(key, self._facts())
        else:
            mark("facts from the cache")
        return self

    def _facts_key(self) -> str:
        """What the count proof and the margin are derived from, beyond the code, the tokenizer and the seed that the
        cache's entries are named by: the tokenizer folder's every file (its chat template), the workload, the
        margin it starts from, the model (its family picks the templates measured) and the counting mode."""
        files = {
            name: xxhash.xxh3_128_hexdigest(data) for name, data in sorted(self.composer.tokenizer.folder_files.items())
        }
        margin = dataclasses.asdict(self.spec.template_margin)
        return facts_key(files, self.spec.to_dict(), margin, self.model, type(self.count).__name__, self.count.name)

    def _facts(self) -> dict:
        margin = self.spec.template_margin
        return {"whole": bool(getattr(self.count, "whole", False)), "margin": [margin.base, margin.per_message]}

    def _adopt_facts(self, facts: dict | None) -> bool:
        """Take a cached proof and margin (as _prove_count and _measure_margin would have decided them); False where
        there are none, or none that read as they were written."""
        if facts is None:
            return False
        whole, margin = facts.get("whole"), facts.get("margin")
        if not (isinstance(whole, bool) and isinstance(margin, list) and len(margin) == 2):
            return False
        if not all(type(v) is int and v >= 0 for v in margin):
            return False
        if whole and isinstance(self.count, TemplateCount):
            self.count.whole = True
        measured = TemplateMargin(*margin)
        if measured != self.spec.template_margin:
            self.spec = dataclasses.replace(self.spec, template_margin=measured)
            check_fits(self.spec)
        return True

    def _prove_count(self) -> None:
        """Template counts by skeleton are proven on every turn of each layout's first session (see prompt_tokens);
        where one differs from the whole rendering, every span is counted by rendering it whole."""
        if not isinstance(self.count, TemplateCount) or self.count.whole:
            return
        plans = [plan for scenario in in_spec(self.spec) for plan in self.plans_for(Task(scenario.id, 0))]
        proven = set()  # layouts of one content share their messages (scenario 2's): each turn is proven once
        for plan in plans:
            for turn in plan.turns:
                shape = (id(plan.catalog), *map(id, turn.messages))
                if shape not in proven:
                    if not self.count.prove(plan.catalog, turn.messages):
                        self.count.whole = True
                        return
                    proven.add(shape)

    def _measure_margin(self) -> None:
        """The window check's template margin, measured on the same first sessions, so scenario 3's tool results
        shrink where the rendered prompt (not a guess at it) would overflow the window; a spec that cannot fit then
        is refused here (nothing is written yet). With template counts, by the template that counts; by content
        (no template), by the shipped template of --model's family, or every shipped one where the family is not
        known: the server renders some template, and it must not push a request past the window."""
        if isinstance(self.count, TemplateCount):
            margin = self._margin_of(self.count, sessions=1)
        else:
            margin = self.spec.template_margin
            for name in self.assumed_templates:
                count = _shipped_count(self.composer.tokenizer, name)
                margin = _widest(margin, self._margin_of(count, sessions=_ASSUMED_SAMPLES))
        if margin != self.spec.template_margin:
            self.spec = dataclasses.replace(self.spec, template_margin=margin)
            check_fits(self.spec)

    @property
    def assumed_templates(self) -> tuple[str, ...]:
        """The shipped templates a tokenizer without its own is measured with: --model's family's, or all."""
        family = family_of(self.model)
        return (family.template,) if family is not None else tuple(SHIPPED_TEMPLATES)

    def _margin_of(self, count: TemplateCount, *, sessions: int) -> TemplateMargin:
        """The margin measured on the first `sessions` sessions of each scenario."""
        samples = [
            [(len(turn.messages), count.input_tokens(plan, turn) - plan.input_tokens(turn)) for turn in plan.turns]
            for scenario in in_spec(self.spec)
            for index in range(min(sessions, scenario.spec(self.spec).count))
            for plan in self.plans_for(Task(scenario.id, index))
        ]
        return measured_margin(samples, self.spec.template_margin)

    def build_piece(self, piece: Piece):
        """One piece of prepare(): a content pool, or a scenario's catalog stage. A pure function of the builder."""
        what, key = piece
        if what == "pool":
            return self.composer.make_pool(key)
        return catalog_stage(self.composer.tokenizer, self._scenario_spec(key), scenario_id=key, seed=self.seed)

    def _build_here(self, pieces: list[Piece]) -> list:
        return [self.build_piece(piece) for piece in pieces]

    def _scenario_spec(self, scenario_id: int):
        return scenario_by_id(scenario_id).spec(self.spec)

    def blocks(self, scenario_id: int) -> ScenarioBlocks:
        if scenario_id not in self._blocks:
            self._blocks[scenario_id] = build_blocks(
                self.composer,
                self._scenario_spec(scenario_id),
                scenario_id=scenario_id,
                seed=self.seed,
                stage=self._stages.pop(scenario_id, None),
            )
        return self._blocks[scenario_id]

    def plans_for(self, task: Task):
        """One plan per layout of the task's scenario, in layout order."""
        scenario = scenario_by_id(task.scenario_id)
        return scenario.plan(self.composer, self.blocks(task.scenario_id), self.spec, seed=self.seed, index=task.index)

    def chunks_for(self, task: Task) -> list[tuple[str, list[bytes]]]:
        """(relative path, chunks whose concatenation is the file) of each trace file of one session index."""
        return [
            (f"{plan.scenario}/{file_name(task.index)}", session_chunks(plan, model=self.model, count=self.count))
            for plan in self.plans_for(task)
        ]

    def files_for(self, task: Task) -> list[tuple[str, bytes]]:
        """(relative path, bytes) of each trace file of one session index."""
        return [(rel, b"".join(chunks)) for rel, chunks in self.chunks_for(task)]
