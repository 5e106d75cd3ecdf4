"""A plain multi-turn conversation: no tools, each request the conversation so far and the user's next message.

    T1  [system, first message]                        -> answer (text)
    T2  + the answer + the user's next message         -> answer
    ...                                                  (`turns` requests a session; think time between them)

What chat services serve, and what a trace of one (Mooncake's conversation trace) looks like: most conversations one
request, answers of hundreds of tokens, the system prompt the only prefix sessions share. `workload fit` chooses it
for traffic with no tool calls at all. The request carries no tool catalog (`tools: 0`, the default); a catalog of
`tools` tokens is sent with every request where given, as a harness that offers tools the model never calls does.
`turn_strata` draws each session's turns from one of several strata, in shares fixed by the session's index (as
agent_loop's do): the long tail of a few long conversations among many short ones, without drawing it by chance.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, cast

from ..content.budget import compose_block
from ..content.compose import Composer
from ..content.vocab import Vocab
from ..messages import Output, SessionPlan, user
from ..shared_blocks import ScenarioBlocks
from ..spec import Count, Levels, Millis, Range, ScenarioSpec, Spec, Tokens
from ..streams import session_rng
from ..tools import ToolCatalog
from .agent_loop import Stratum
from .base import MOST_REQUESTS, MOST_REQUESTS_WHY, ConfigEntry, Request, Scenario, Shape
from .common import Chain

__all__ = ["SCENARIO", "ChatSpec", "plan_sessions", "shape"]

SCENARIO_ID = 7
NAME = DIRECTORY = "chat"
_STRATA_STEP = 0.6180339887498949  # the golden ratio's fractional part (agent_loop's, for the same spread)
_LINE_BOUND = 40  # tokens of a message's opening line, standing whole where its budget is smaller
NO_TOOLS = ToolCatalog((), "[]", 0)


@dataclass(frozen=True)
class ChatSpec(ScenarioSpec):
    """Conversations of `turns` requests, each a user message answered by text."""

    not_tokens = frozenset({"turns", "turn_strata", "session_spacing_ms"})
    answers = ("answer",)
    repo_map: ClassVar[int] = 0  # shared_blocks composes one for every scenario; a chat sends none
    spawns_subagents: ClassVar[bool] = False

    sessions: Count = 20
    system: Tokens = 1000  # the system prompt every session sends first: the prefix sessions share
    tools: Tokens = 0  # a tool catalog every request carries (0: none)
    first: Range = Range(200, 2000)  # the user's first message
    message: Range = Range(50, 500)  # each later message of the user
    answer: Range = Range(100, 800)  # each answer's tokens
    turns: Range = Range(1, 4)  # requests a session
    turn_strata: tuple[Stratum, ...] = ()  # when given, each session's turns come from its stratum, not `turns`
    concurrency: Levels = (5, 20)
    session_spacing_ms: Millis = 30_000

    def __post_init__(self) -> None:
        super().__post_init__()
        self.require(self.turns.lo >= 1, "turns", "must be at least 1")
        if self.turn_strata:
            total = sum(st.percent for st in self.turn_strata)
            self.require(total == 100, "turn_strata", f"percents must add up to 100 (they add up to {total})")
            for st in self.turn_strata:
                self.require(st.turns.lo >= 1, "turn_strata", "turns must be at least 1 in every stratum")
        field = "turn_strata" if self.turn_strata else "turns"
        self.require(
            self.most_turns <= MOST_REQUESTS,
            field,
            f"make sessions of up to {self.most_turns} requests; {MOST_REQUESTS_WHY}, so at most {MOST_REQUESTS}",
        )

    @property
    def fewest_turns(self) -> int:
        return min(st.turns.lo for st in self.turn_strata) if self.turn_strata else self.turns.lo

    @property
    def most_turns(self) -> int:
        return max(st.turns.hi for st in self.turn_strata) if self.turn_strata else self.turns.hi

    def session_turns(self, index: int) -> Range:
        """The range session `index` draws its turns from: its stratum's, or `turns`."""
        if not self.turn_strata:
            return self.turns
        at, edge = 100 * ((index * _STRATA_STEP) % 1.0), 0
        for st in self.turn_strata:
            edge += st.percent
            if at < edge:
                return st.turns
        return self.turn_strata[-1].turns


def plan_sessions(
    composer: Composer, blocks: ScenarioBlocks, spec: Spec, *, seed: int, index: int
) -> list[SessionPlan]:
    s = cast(ChatSpec, spec.scenarios[NAME])
    rng = session_rng(seed, SCENARIO_ID, index)
    v = Vocab(rng)
    catalog = blocks.catalog if s.tools else NO_TOOLS
    chain = Chain(
        timing=spec.timing,
        catalog=catalog,
        prefix=f"{DIRECTORY}-{index:04d}",
        messages=(blocks.system,),
        start_ms=index * s.session_spacing_ms,
        after=(),
    )
    turns = s.session_turns(index).draw(rng)
    for k in range(turns):
        if k:
            chain.carry(gap=spec.timing.think_gap_ms.draw(rng))
        opening = f"How does {v.func_name()} handle {v.noun()} {v.noun()}?\n" if k else _first_line(v)
        budget = (s.message if k else s.first).draw(rng)
        chain.add(user(compose_block(composer, opening, "prose", budget, rng)))
        reply = compose_block(composer, f"About the {v.noun()} {v.noun()}:\n", "prose", s.answer.draw(rng), rng)
        chain.send(Output(reply))
    return [SessionPlan(DIRECTORY, chain.prefix, index, catalog, tuple(chain.turns))]


def _first_line(v: Vocab) -> str:
    return f"I maintain the {v.noun()} {v.noun()} service and need help with {v.func_name()}.\n"


def largest_requests(spec: Spec) -> list[Request]:
    """The last request of the longest session: every message and answer before it, and its own answer."""
    s = cast(ChatSpec, spec.scenarios[NAME])
    later = s.most_turns - 1
    prompt = s.tools + s.system + s.first.hi + _LINE_BOUND + later * (s.answer.hi + s.message.hi + 2 * _LINE_BOUND)
    return [Request("chat answer", prompt, s.answer.hi + _LINE_BOUND, 1 + 2 * s.most_turns)]


def config_entries(spec: Spec) -> list[ConfigEntry]:
    s = cast(ChatSpec, spec.scenarios[NAME])
    return [
        ConfigEntry(
            f"{NAME}/c{level}.yml",
            DIRECTORY,
            level,
            s.sessions,
            s.most_turns,  # inference-perf queues all of a session's requests at once, each holding a slot
            about=f"c{level}: {level} sessions in flight at a time, {s.sessions} in all, each a conversation of "
            f"{s.fewest_turns}-{s.most_turns} requests",
        )
        for level in s.concurrency
    ]


def shape(sc: ChatSpec) -> Shape:
    """One event per request, each hanging off the one before; no tool calls."""
    return Shape(sc.fewest_turns, sc.most_turns, "chain", frozenset())


SCENARIO = Scenario(
    id=SCENARIO_ID,
    name=NAME,
    spec_type=ChatSpec,
    layouts=(DIRECTORY,),
    shape=shape,
    plan=plan_sessions,
    largest_requests=largest_requests,
    configs=config_entries,
)
