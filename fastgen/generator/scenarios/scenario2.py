"""Scenario 2: one root context fans out into five parallel candidate fixes.

    root      [system, repo map, bug report, module, logs] (55-95K with the tools)  -> coordinator response
    branch k  root input + root output + instruction k                                -> candidate k (prose + diff)

Each candidate's diff patches the module the root shows (each afresh), so it applies to it.

Sync and stagger share every byte of content (one content RNG stream) and differ only in when the branches start:
within 0.5 s of the root's end, or 1-5 s after it. Every branch ends after the last sibling has started, because
inference-perf's temporal fallback would otherwise chain a late branch behind a finished sibling.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, cast

from annotated_types import MinLen

from ..shared_blocks import ScenarioBlocks
from ..content.budget import compose_block, file_frame
from ..content.compose import Composer
from ..content.patch import make_patch
from ..content.vocab import Vocab
from ..messages import Output, SessionPlan, Turn, user
from ..spec import Count, Levels, Millis, Range, ScenarioSpec, Spec, Tokens
from ..streams import session_rng
from .base import ConfigEntry, Request, Scenario, Shape
from .common import CALL_TOKENS_BOUND, duration_ms, letters, ticket_name

__all__ = ["SCENARIO", "Scenario2Spec", "plan_sessions", "root_budget"]

SCENARIO_ID = 2
NAME = "scenario2"
LAYOUTS = ("scenario2_sync", "scenario2_stagger")


@dataclass(frozen=True)
class Scenario2Spec(ScenarioSpec):
    """Fan-out: one root, parallel branches (five by default); sync and stagger differ only in timing."""

    count_field = "sets"
    not_tokens = frozenset({"sync_window_ms", "stagger_ms", "set_spacing_ms"})
    answers = ("root_output", "branch_output")

    sets: Count = 50
    system: Tokens = 2000
    tools: Tokens = 8000
    repo_map: Tokens = 40000
    root_prompt: Range = Range(55000, 95000)  # spread evenly across the sets
    bug_report: Range = Range(800, 1200)
    root_output: Range = Range(300, 600)
    branch_output: Range = Range(1000, 2000)
    branches: Annotated[tuple[str, ...], MinLen(1)] = (
        "smallest patch",
        "refactor first",
        "add validation",
        "optimize hot path",
        "preserve compat",
    )
    concurrency: Levels = (10, 25, 50)
    sync_window_ms: Millis = 500
    stagger_ms: Range = Range(1000, 5000)
    set_spacing_ms: Millis = 60_000


_MODULE_TOKENS = 6000  # at most, of the root prompt's own text: the module every candidate patches
_INSTRUCTIONS = {
    "smallest patch": "Produce the smallest patch that fixes {ticket}; touch as few lines as you can.",
    "refactor first": "Refactor the code around {ticket} first so the fix becomes obvious, then fix it.",
    "add validation": "Fix {ticket} by validating inputs at the boundary and rejecting bad state early.",
    "optimize hot path": "Fix {ticket} and keep the hot path fast: no extra allocation or lock per call.",
    "preserve compat": "Fix {ticket} while keeping every public signature and wire format compatible.",
}


def root_budget(spec: Spec, index: int) -> int:
    """Root prompt sizes are spread evenly over the range across the sets."""
    s = cast(Scenario2Spec, spec.scenarios[NAME])
    if s.sets == 1:
        return s.root_prompt.lo
    return s.root_prompt.lo + (s.root_prompt.hi - s.root_prompt.lo) * index // (s.sets - 1)


def _branch_output(composer: Composer, rng, budget: int, path: str, code: str):
    """Prose, then a diff of the module the root prompt shows (each candidate patches it afresh); prose alone where
    the budget cannot hold the smallest diff as well."""
    fence = composer.line("```diff\n")
    close = composer.line("```\n")
    patch = make_patch(Vocab(rng), path, code, composer.chars_for(budget * 2 // 3, "code"))
    diff = composer.line(patch.diff)
    prose = budget - diff.tokens - fence.tokens - close.tokens
    if prose < 1:
        return composer.fill("prose", budget, rng)
    return composer.join([composer.fill("prose", prose, rng), fence, diff, close])


def plan_sessions(
    composer: Composer, blocks: ScenarioBlocks, spec: Spec, *, seed: int, index: int
) -> list[SessionPlan]:
    """The sync and the stagger session of one branch set: the same content, different branch start times."""
    s = cast(Scenario2Spec, spec.scenarios[NAME])
    rng = session_rng(seed, SCENARIO_ID, index)
    v = Vocab(rng)
    ticket = ticket_name(v)

    path = v.module_path()
    bug = compose_block(
        composer,
        f"Bug report {ticket}: intermittent {v.class_name()} in {path}.\n",
        "prose",
        s.bug_report.draw(rng),
        rng,
    )
    fixed = blocks.catalog.tokens + blocks.system.tokens + blocks.repo_map.tokens + bug.tokens
    rest = max(root_budget(spec, index) - fixed, 2)
    heading = composer.line("The module the failures point at:\n")
    opening, closing = file_frame(composer, path)
    frame = heading.tokens + opening.tokens + closing.tokens
    body = composer.fill("code", max(min(rest // 3, _MODULE_TOKENS) - frame, 0), rng)
    module, code = composer.join([heading, opening, body, closing]), body.text
    logs = compose_block(
        composer, f"Production logs around the failures of {ticket}:\n", "logline", max(rest - module.tokens, 1), rng
    )
    root = (blocks.system, blocks.repo_map, user(bug), user(module), user(logs))
    root_output = Output(composer.fill("prose", s.root_output.draw(rng), rng))
    branches = []
    for k, name in enumerate(s.branches):
        letter = letters(k)
        text = _INSTRUCTIONS[name].format(ticket=ticket) if name in _INSTRUCTIONS else name  # a user's name as is
        instruction = composer.line(f"Candidate {letter} ({name}): {text}\n")
        messages = root + (root_output.as_history(), user(instruction))
        branches.append((messages, Output(_branch_output(composer, rng, s.branch_output.draw(rng), path, code))))
    return [_timed(spec, blocks, seed, index, layout, root, root_output, branches) for layout in LAYOUTS]


def _timed(
    spec: Spec, blocks: ScenarioBlocks, seed: int, index: int, layout: str, root, root_output: Output, branches
) -> SessionPlan:
    s = cast(Scenario2Spec, spec.scenarios[NAME])
    rng = session_rng(seed, SCENARIO_ID, index, LAYOUTS.index(layout))
    start = index * s.set_spacing_ms
    root_end = start + duration_ms(spec.timing, blocks.catalog.tokens + sum(m.tokens for m in root), root_output.tokens)
    session_id = f"{layout}-{index:04d}"
    turns = [Turn(f"{session_id}-root", 0, root, root_output, start, root_end, role="root")]
    if layout == "scenario2_sync":
        offsets = sorted(int(rng.integers(0, s.sync_window_ms + 1)) for _ in branches)
    else:
        offsets = sorted(s.stagger_ms.draw(rng) for _ in branches)
    last_start = root_end + offsets[-1]
    for k, ((messages, output), offset) in enumerate(zip(branches, offsets), start=1):
        b_start = root_end + offset
        natural_end = b_start + duration_ms(
            spec.timing, blocks.catalog.tokens + sum(m.tokens for m in messages), output.tokens
        )
        turns.append(
            Turn(f"{session_id}-b{k}", k, messages, output, b_start, max(natural_end, last_start + 1000), role="branch")
        )
    return SessionPlan(layout, session_id, index, blocks.catalog, tuple(turns))


def largest_requests(spec: Spec) -> list[Request]:
    s = cast(Scenario2Spec, spec.scenarios[NAME])
    # The root is its budget, or more when its fixed blocks alone are larger; the branch adds the root's answer and
    # an instruction line (a token is at least a byte, so a name's bytes bound its tokens).
    root = max(s.root_prompt.hi, s.tools + s.system + s.repo_map + s.bug_report.hi + CALL_TOKENS_BOUND)
    instruction = CALL_TOKENS_BOUND + max(len(name.encode()) for name in s.branches)
    return [Request("scenario 2 branch", root + s.root_output.hi + instruction, s.branch_output.hi, 7)]


def config_entries(spec: Spec) -> list[ConfigEntry]:
    s = cast(Scenario2Spec, spec.scenarios[NAME])
    entries = []
    for level in s.concurrency:
        sets = min(level, s.sets)
        for layout in LAYOUTS:
            timing = layout.rsplit("_", 1)[1]
            spread = (
                f"within {s.sync_window_ms / 1000:g} s"
                if timing == "sync"
                else f"{s.stagger_ms.lo / 1000:g}-{s.stagger_ms.hi / 1000:g} s apart"
            )
            entries.append(
                ConfigEntry(
                    f"{NAME}/c{level}_{timing}.yml",
                    layout,
                    level,
                    sets,
                    1 + len(s.branches),  # the root and its parallel branches
                    about=f"c{level}_{timing}: {sets} branch sets at once, each a root request and then "
                    f"{len(s.branches)} branches that start {spread} ({sets * (1 + len(s.branches))} requests)",
                )
            )
    return entries


def shape(sc: Scenario2Spec) -> Shape:
    return Shape(1 + len(sc.branches), 1 + len(sc.branches), "fan")


SCENARIO = Scenario(
    id=SCENARIO_ID,
    name=NAME,
    spec_type=Scenario2Spec,
    layouts=LAYOUTS,
    shape=shape,
    plan=plan_sessions,
    largest_requests=largest_requests,
    configs=config_entries,
)
