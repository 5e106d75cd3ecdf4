"""A declared fan-out: one root request, then branches that each carry it and add their own message (steps.py).

    root      [system, repo map] + root's add            -> root's answer (text, or parallel tool calls)
    branch k  root's input + root's answer (+ results) + branch's add (drawn afresh for each)   -> branch k's answer

Every branch hangs off the root by the root's answer (its text, or its tool-call ids): inference-perf builds a fan
of SHARED, OUTPUT, UNIQUE segments. Scenario 2 is one such fan (tests/generator/test_declared.py declares it).

`stagger_ms` is when each branch starts after the root's answer (after its tools, where it called some): 0 starts
them all together, as scenario 2's sync does; a range or a log-normal spreads them, as its stagger does. As in
scenario 2, every branch ends after the last sibling has started: inference-perf's temporal fallback would otherwise
chain a late branch behind a finished sibling, and each branch must have the root as its one predecessor.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import cast

from ...errors import SpecError
from ..shared_blocks import ScenarioBlocks
from ..content.compose import Composer
from ..content.vocab import Vocab
from ..messages import Message, SessionPlan, Turn
from ..spec import Count, Delay, Levels, LogNormal, Millis, Range, ScenarioSpec, Spec, Tokens
from ..streams import session_rng
from .base import MOST_REQUESTS, MOST_REQUESTS_WHY, ConfigEntry, Request, Scenario, Shape
from .chain import HEADERS_BOUND
from .common import duration_ms, gap, history
from .steps import Block, Step, added, added_bound, answer, history_bound, max_tokens

__all__ = ["SCENARIO", "FanSpec", "plan_sessions", "shape"]

SCENARIO_ID = 6
NAME = DIRECTORY = "fan"
# How long every branch runs past the last sibling's start, at least (scenario 2 keeps the same second)
_OVERLAP_MS = 1000


@dataclass(frozen=True)
class FanSpec(ScenarioSpec):
    """Sessions of one `root` request and `branches` requests that each carry it and add `branch`'s messages."""

    not_tokens = frozenset({"root", "branch", "branches", "stagger_ms", "session_spacing_ms"})

    sessions: Count = 20
    system: Tokens = 2000
    tools: Tokens = 8000
    repo_map: Tokens = 20000
    root: Step = Step(
        add=(
            Block("prose", Range(800, 1200), "Bug report: the nightly export drops rows under load."),
            Block("code", Range(3000, 6000), "The module the failures point at:"),
            Block("logline", Range(10000, 30000), "Production logs around the failures:"),
        ),
        text=Block("prose", Range(300, 600)),
    )
    branches: Range = Range(5, 5)
    branch: Step = Step(
        add=(Block("prose", Range(30, 80), "Write one candidate fix, different from the other candidates:"),),
        text=Block("prose", Range(1000, 2000)),
    )
    stagger_ms: Delay = Range(0, 0)  # when each branch starts after the root's answer; 0: all at once
    concurrency: Levels = (10, 25)
    session_spacing_ms: Millis = 60_000

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.root.repeat != 1 or self.branch.repeat != 1:
            raise SpecError("root and branch are one request each: leave repeat out (a chain repeats steps)")
        if not self.root.add:
            raise SpecError("root must add a message (the task): the first request starts with it")
        if not self.branch.add:
            raise SpecError("branch must add a message: each branch's own instruction, after the root's answer")
        if self.branch.text is None:
            raise SpecError(
                "branch must answer with text: a branch is the last request of its line, so no request "
                "would send its calls' results"
            )
        if self.branches.lo < 1:
            raise SpecError(f"branches must be at least 1, got {{lo: {self.branches.lo}, hi: {self.branches.hi}}}")
        if 1 + self.branches.hi > MOST_REQUESTS:
            raise SpecError(
                f"branches make sessions of up to {1 + self.branches.hi} requests; {MOST_REQUESTS_WHY}, so at "
                f"most {MOST_REQUESTS}"
            )

    def scaled(self, *, sessions: float, budgets: float) -> "FanSpec":
        spec = super().scaled(sessions=sessions, budgets=budgets)
        return dataclasses.replace(spec, root=self.root.scaled(budgets), branch=self.branch.scaled(budgets))


def plan_sessions(
    composer: Composer, blocks: ScenarioBlocks, spec: Spec, *, seed: int, index: int
) -> list[SessionPlan]:
    s = cast(FanSpec, spec.scenarios[NAME])
    rng = session_rng(seed, SCENARIO_ID, index)
    v = Vocab(rng)
    prefix = f"{DIRECTORY}-{index:04d}"
    read: set[str] = set()
    root: tuple[Message, ...] = (blocks.system, blocks.repo_map) + added(composer, rng, s.root)
    root_output, results = answer(composer, rng, v, s.root, read=read)
    carried = root + history(root_output, results)
    branches = []
    for _ in range(s.branches.draw(rng)):
        messages = carried + added(composer, rng, s.branch)
        branches.append((messages, answer(composer, rng, v, s.branch, read=read)[0]))

    def prompt(messages: tuple[Message, ...]) -> int:
        return blocks.catalog.tokens + sum(m.tokens for m in messages)

    start = index * s.session_spacing_ms
    root_end = start + duration_ms(spec.timing, prompt(root), root_output.tokens)
    root_span = f"{prefix}-root"
    turns = [Turn(root_span, 0, root, root_output, start, root_end, role="root", after=())]
    ready = root_end + (gap(spec.timing, rng, root_output) if root_output.calls else 0)  # the tools run first
    offsets = sorted(s.stagger_ms.draw(rng) for _ in branches)
    last_start = ready + offsets[-1]
    for k, ((messages, output), offset) in enumerate(zip(branches, offsets), start=1):
        b_start = ready + offset
        natural_end = b_start + duration_ms(spec.timing, prompt(messages), output.tokens)
        end = max(natural_end, last_start + _OVERLAP_MS)
        turns.append(Turn(f"{prefix}-b{k}", k, messages, output, b_start, end, role="branch", after=(root_span,)))
    ordered = tuple(sorted(turns, key=lambda turn: (turn.start_ms, turn.span_id)))  # inference-perf's order
    return [SessionPlan(DIRECTORY, prefix, index, blocks.catalog, ordered)]


def largest_requests(spec: Spec) -> list[Request]:
    s = cast(FanSpec, spec.scenarios[NAME])
    root = s.tools + s.system + s.repo_map + HEADERS_BOUND + added_bound(s.root)
    root_messages = 2 + len(s.root.add)
    branch = root + history_bound(s.root) + added_bound(s.branch)
    branch_messages = root_messages + 1 + len(s.root.calls) + len(s.branch.add)
    return [
        Request("fan root", root, max_tokens(s.root), root_messages),
        Request("fan branch", branch, max_tokens(s.branch), branch_messages),
    ]


def _when(delay: Delay) -> str:
    if isinstance(delay, LogNormal):
        return f"a median {delay.median / 1000:g} s after the root's answer"
    if delay.hi == 0:
        return "together at the root's answer"
    return f"{delay.lo / 1000:g}-{delay.hi / 1000:g} s after the root's answer"


def config_entries(spec: Spec) -> list[ConfigEntry]:
    s = cast(FanSpec, spec.scenarios[NAME])
    most = shape(s).most
    branches = str(s.branches.lo) if s.branches.lo == s.branches.hi else f"{s.branches.lo}-{s.branches.hi}"
    return [
        ConfigEntry(
            f"{NAME}/c{level}.yml",
            DIRECTORY,
            level,
            s.sessions,
            most,  # the root and its parallel branches, all queued at once
            about=f"c{level}: {level} fans in flight at a time, {s.sessions} in all, each a root request and "
            f"{branches} branches that start {_when(s.stagger_ms)}",
        )
        for level in s.concurrency
    ]


def shape(sc: FanSpec) -> Shape:
    """The root, then every branch off it; the root is the one event that may answer with calls."""
    tool_events = frozenset({0}) if sc.root.answers_with_calls else frozenset()
    return Shape(1 + sc.branches.lo, 1 + sc.branches.hi, "fan", tool_events)


SCENARIO = Scenario(
    id=SCENARIO_ID,
    name=NAME,
    spec_type=FanSpec,
    layouts=(DIRECTORY,),
    shape=shape,
    plan=plan_sessions,
    largest_requests=largest_requests,
    configs=config_entries,
)
