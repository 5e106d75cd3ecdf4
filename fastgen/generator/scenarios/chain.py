"""A declared chain: a session of requests the workload file lists step by step (steps.py has the step form).

    T1  [system, repo map] + step 1's add                -> step 1's answer (text, or parallel tool calls)
    T2  + that answer (+ each call's result by id) + step 2's add   -> step 2's answer
    ...                                                     (a step with `repeat: n` is n requests in a row)

Each request is the one before it, its answer and the next step's messages, so inference-perf builds a linear chain
of SHARED, OUTPUT, UNIQUE segments: the edge is the answer's text, or its tool-call ids (fed forward live at
replay). Scenario 1 is one such chain (tests/generator/test_declared.py declares it); this module lets a workload write others
without code. Gaps between requests are the workload's timing: think time after a text, the slowest tool after calls.

`shared_prefix: false` opens each session's system prompt with a line of its own (a random id and the session's
number), so no two sessions share a prefix beyond the chat template's first tokens: with one step a session is one
request, and no request can reuse another's cache (the zero-reuse control arm of `--workload fleet`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import cast

from ...errors import SpecError
from ..shared_blocks import ScenarioBlocks
from ..content.compose import Composer, Text
from ..content.vocab import Vocab
from ..messages import Message, SessionPlan, system
from ..spec import Count, Levels, Millis, Range, ScenarioSpec, Spec, Tokens
from ..streams import session_rng
from .base import MOST_REQUESTS, MOST_REQUESTS_WHY, ConfigEntry, Request, Scenario, Shape
from .common import Chain, gap
from .steps import (
    Block,
    Call,
    Step,
    Steps,
    added,
    added_bound,
    answer,
    history_bound,
    max_tokens,
    scaled_steps,
)

__all__ = ["SCENARIO", "ChainSpec", "plan_sessions", "shape"]

SCENARIO_ID = 5
NAME = DIRECTORY = "chain"
# The header lines of the system prompt and the repo map (shared_blocks.py), which stand whole where a budget is smaller
HEADERS_BOUND = 120
# The tokens of the line that opens a session's own system prompt (shared_prefix false): an id, a number, a few words
SESSION_LINE_BOUND = 32

# A task, a look around, an edit and its test run, and the report: what `scenarios: {chain: {}}` generates
_DEFAULT_STEPS = (
    Step(
        add=(Block("prose", Range(300, 800), "Task: find why the nightly export drops rows, and fix it."),),
        calls=(
            Call("read_file", Block("numbered_code", Range(300, 2000))),
            Call("search_code", Block("search", Range(200, 1000))),
        ),
    ),
    Step(calls=(Call("read_file", Block("numbered_code", Range(300, 2000))),), repeat=3),
    Step(calls=(Call("apply_patch", Block("logline", Range(40, 120)), Range(150, 400)),)),
    Step(calls=(Call("run_tests", Block("logline", Range(500, 2000))),)),
    Step(text=Block("prose", Range(300, 800))),
)


@dataclass(frozen=True)
class ChainSpec(ScenarioSpec):
    """Sessions of the requests `steps` declares, each carrying the one before it."""

    not_tokens = frozenset({"steps", "session_spacing_ms"})

    sessions: Count = 20
    system: Tokens = 2000
    tools: Tokens = 8000
    repo_map: Tokens = 20000
    steps: Steps = _DEFAULT_STEPS
    concurrency: Levels = (5, 20)
    session_spacing_ms: Millis = 30_000
    # false: each session's system prompt opens with a line of its own, so sessions share no prefix
    shared_prefix: bool = True

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.steps:
            raise SpecError("steps must list at least one step")
        if not self.steps[0].add:
            raise SpecError("steps[0] must add a message (the task): the first request starts with it")
        for i, (before, step) in enumerate(zip(self.steps, self.steps[1:]), start=1):
            if before.text is not None and not step.add:
                raise SpecError(
                    f"steps[{i}] follows a text answer and must add a message: a request cannot end on the model's "
                    "own answer"
                )
        if self.steps[-1].calls:
            raise SpecError(
                f"steps[{len(self.steps) - 1}] is the last step and must answer with text: no request would send its "
                "calls' results"
            )
        if events(self) > MOST_REQUESTS:
            raise SpecError(
                f"steps make sessions of {events(self)} requests; {MOST_REQUESTS_WHY}, so at most "
                f"{MOST_REQUESTS}: fewer steps or a smaller repeat"
            )

    def scaled(self, *, sessions: float, budgets: float) -> "ChainSpec":
        spec = super().scaled(sessions=sessions, budgets=budgets)
        return dataclasses.replace(spec, steps=scaled_steps(self.steps, budgets))


def events(s: ChainSpec) -> int:
    return sum(step.repeat for step in s.steps)


def requests(s: ChainSpec) -> list[Step]:
    """The step of each request of a session, in order (a repeated step once per repetition)."""
    return [step for step in s.steps for _ in range(step.repeat)]


def plan_sessions(
    composer: Composer, blocks: ScenarioBlocks, spec: Spec, *, seed: int, index: int
) -> list[SessionPlan]:
    s = cast(ChainSpec, spec.scenarios[NAME])
    rng = session_rng(seed, SCENARIO_ID, index)
    v = Vocab(rng)
    read: set[str] = set()
    opening = blocks.system if s.shared_prefix else _own_system(composer, blocks.system, rng, index)
    chain = Chain(
        timing=spec.timing,
        catalog=blocks.catalog,
        prefix=f"{DIRECTORY}-{index:04d}",
        messages=(opening, blocks.repo_map),
        start_ms=index * s.session_spacing_ms,
        after=(),
    )
    for step in requests(s):
        chain.add(*added(composer, rng, step))
        output, results = answer(composer, rng, v, step, read=read)
        chain.send(output)
        chain.carry(results, gap=gap(spec.timing, rng, output))
    return [SessionPlan(DIRECTORY, chain.prefix, index, blocks.catalog, tuple(chain.turns))]


def _own_system(composer: Composer, shared: Message, rng, index: int) -> Message:
    """The system prompt opened by a line only this session has: a random id first (so that even the first tokens
    after the template's differ between sessions), then its number (so that no two are the same)."""
    line = composer.line(f"{int(rng.integers(1 << 32)):08x} is the id of session {index}.\n")
    return system(composer.join([line, Text(shared.content or "", shared.tokens, shared.ends)]))


def largest_requests(spec: Spec) -> list[Request]:
    """Each request of the chain at its most: the prompt grows by every step before it, so the last of each step is
    its largest (a repeated step's last repetition)."""
    s = cast(ChainSpec, spec.scenarios[NAME])
    prompt, messages = s.tools + s.system + s.repo_map + HEADERS_BOUND, 2
    prompt += 0 if s.shared_prefix else SESSION_LINE_BOUND
    largest: list[Request] = []
    carried = carried_messages = 0
    for number, step in enumerate(requests(s), start=1):
        prompt += carried + added_bound(step)
        messages += carried_messages + len(step.add)
        largest.append(Request(f"chain request {number}", prompt, max_tokens(step), messages))
        carried, carried_messages = history_bound(step), 1 + len(step.calls)
    return largest


def config_entries(spec: Spec) -> list[ConfigEntry]:
    s = cast(ChainSpec, spec.scenarios[NAME])
    n = events(s)
    return [
        ConfigEntry(
            f"{NAME}/c{level}.yml",
            DIRECTORY,
            level,
            s.sessions,
            n,  # inference-perf queues all of a session's requests at once, each holding a slot
            about=f"c{level}: {level} sessions in flight at a time, {s.sessions} in all, each a chain of {n} requests "
            f"in {len(s.steps)} declared steps",
        )
        for level in s.concurrency
    ]


def shape(sc: ChainSpec) -> Shape:
    """One event per request, each hanging off the one before; the calls are where the steps put them."""
    tool_events = frozenset(i for i, step in enumerate(requests(sc)) if step.answers_with_calls)
    return Shape(events(sc), events(sc), "chain", tool_events)


SCENARIO = Scenario(
    id=SCENARIO_ID,
    name=NAME,
    spec_type=ChainSpec,
    layouts=(DIRECTORY,),
    shape=shape,
    plan=plan_sessions,
    largest_requests=largest_requests,
    configs=config_entries,
)
