"""A long agent loop: parallel tool calls, think time and tool latency, and context compaction.

    T1  [system, repo map, task]                          -> k1 tool calls in one answer (read_file, search_code, ...)
    T2  + the calls + k1 tool results                     -> k2 tool calls
    ...                                                      (each request: the last one plus the answer and results)
    Tc  + ... + "summarize the session so far"            -> summary      (when a prompt reaches compact_trigger)
    Tc+1 [system, summary, "continue from the summary"]   -> tool calls   (the old prefix is gone from here on)
    ...
    Tn  + the calls + results                             -> final answer (text)

Parallel calls are one assistant message with k `tool_calls` and, in the next request, k `role: tool` messages
answering them by id: inference-perf links the turns by those ids (`tool_call_ids_matched`) and feeds the live ids
forward at replay. A compaction is two requests, as harnesses do it: the long prompt plus an instruction, answered by
a summary, then a new prompt that keeps only the system prompt (and the tool catalog every request carries). The
summary stands in the new prompt as the assistant's own message, so inference-perf's graph builder (it links a
request to an earlier one only through assistant-role text) sees the causal edge and substitutes the live summary at
replay; a summary passed as a user message, as some harnesses do, would leave a temporal edge and the recorded text.

Sub-agents (`subagents`, depth one): one answer of the loop is k `delegate_task` calls; each starts a child
conversation [sub-agent system prompt, the call's prompt] that runs its own tool loop and ends with a report, all k
side by side; the parent's next request (the join) carries the calls and the k reports as `role: tool` results, as
a harness sends them. inference-perf links requests only through assistant-role text and tool-call ids, so a
`role: tool` report would give the join no edge to its child: the recorded spawning message also carries the reports
as `content`, hidden (a replay puts the spawn's live answer in that slot and never sends it; no token count has it),
and each child's report then links its last request to the join by substring match (`full_match`). The join waits
for every child; the reports it sends are the recorded ones (a live answer only ever fills an assistant slot). A
child's first request is timed after the spawn (no text of the parent's is in it); a child's later request may also
be tied by inference-perf's one timing edge to a sibling's request that ended before it (`fastgen.after` says `~*`).

Gaps between requests are the workload's timing: a tool-call answer is followed by the slowest of its k tools
(tool_exec_ms, drawn k times), a text answer by think time (think_gap_ms); either may be log-normal.

Field-shaped sessions (all off by default, so that a workload without them keeps its bytes): `tasks` gives a
session several tasks, each a loop and a final answer, the next task's message sent after the human's think time on
the same conversation; `turn_strata` draws each session's turns from one of several strata, in shares fixed by the
session's index (a low-discrepancy sequence, so a stratum of 2 % is 2 % of the sessions at any count): a heavy tail
of long sessions without drawing it by chance; `edit_percent` makes that share of tool answers one apply_patch call
whose diff (`edit` tokens) is the answer, as edits carry most of an agent's output; `compact_keep: opening` keeps the
session's opening (system prompt, repository map, first task) in the prompt after a compaction, as harnesses keep
their instructions; `subagent_percent` is the share of sessions that delegate at all; `even_waits` puts the human's
waits before later tasks at evenly spread quantiles of think_gap_ms, so that their median and p90 hold over a few
hundred waits.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from statistics import NormalDist
from typing import Annotated, ClassVar, Literal, cast

import numpy as np
from annotated_types import Ge, Le

from ..shared_blocks import ScenarioBlocks
from ..content.budget import compose_block, numbered_code
from ..content.compose import Composer, Text
from ..content.patch import make_patch, patch_summary
from ..content.vocab import Vocab
from ..messages import (
    FOLLOWS_ANY,
    Message,
    Output,
    SessionPlan,
    ToolCall,
    Turn,
    assistant_calls,
    assistant_text,
    tool_result,
    user,
)
from ..spec import (
    STRICT_KEYS,
    TOOL_CALL_MIN_MAX_TOKENS,
    Count,
    Levels,
    LogNormal,
    Millis,
    Range,
    ScenarioSpec,
    Spec,
    Tokens,
)
from ..streams import session_rng
from ..tools import DELEGATE
from .base import MOST_REQUESTS, MOST_REQUESTS_WHY, ConfigEntry, Request, Scenario, Shape
from .common import CALL_TOKENS_BOUND, Chain, gap, make_call, ticket_name

__all__ = ["SCENARIO", "AgentLoopSpec", "Stratum", "plan_sessions"]

SCENARIO_ID = 4
NAME = DIRECTORY = "agent_loop"
_COMPACT = "Context is nearly full. Summarize the session so far: the task, what you read and found, what is left.\n"
# the compaction's number keeps two restarts of one session apart (their other messages are the same)
_CONTINUE = "Continue {ticket} from your summary above (context compacted {n} times so far).\n"
COMPACTION = "compaction"  # the turn kind of a compaction request (fastgen.turn_kind in its span)
SUBAGENT = "subagent"  # the turn kind of a sub-agent's request
_INSTRUCTIONS_BOUND = 40  # tokens of either instruction above (or a report's footer), for the up-front window check
_EDIT_RESULT_BOUND = 60  # tokens of an apply_patch result (the patch summary line)
# Where a session stands in the sequence that assigns strata and sub-agents: i x (an irrational) mod 1 spreads any
# number of sessions evenly over [0, 1), two different ones keep the two assignments apart
_STRATA_STEP = 0.6180339887498949  # the golden ratio's fractional part
_SUBAGENT_STEP = 0.4142135623730951  # sqrt(2) - 1
_WAIT_STEP = 0.7320508075688772  # sqrt(3) - 1
Percent = Annotated[int, Ge(0), Le(100)]


def _position(index: int, step: float) -> float:
    return (index * step) % 1.0


def _even_wait(spec: Spec, index: int, job: int) -> int:
    """The human's wait before task job + 2 of session `index`, at the quantile the low-discrepancy sequence puts
    there: over a few hundred waits their median and p90 are the distribution's, where random draws of so long a
    tail (a p90 15 times the median) stray by a fifth."""
    # each task's waits spread over the sessions on their own (a shift per task), apart from the strata's sequence
    u = min(max((index * _WAIT_STEP + job * _SUBAGENT_STEP) % 1.0, 1e-6), 1 - 1e-6)
    gap = spec.timing.think_gap_ms
    if isinstance(gap, LogNormal):
        z = NormalDist().inv_cdf(u)
        return min(gap.cap, int(round(gap.median * math.exp(gap.sigma * z))))
    return min(gap.hi, gap.lo + int(u * (gap.hi - gap.lo + 1)))


@dataclass(frozen=True)
class Stratum:
    """One stratum of `turn_strata`: this percent of the sessions draw each task's turns from `turns`."""

    __pydantic_config__: ClassVar[dict] = STRICT_KEYS

    percent: Annotated[int, Ge(1), Le(100)]
    turns: Range


@dataclass(frozen=True)
class AgentLoopSpec(ScenarioSpec):
    """A tool loop of `turns` answers of parallel calls and a final answer, compacting at `compact_trigger`."""

    not_tokens = frozenset(
        {
            "turns",
            "parallel_calls",
            "session_spacing_ms",
            "subagents",
            "spawn_at",
            "subagent_turns",
            "tasks",
            "turn_strata",
            "edit_percent",
            "subagent_percent",
        }
    )
    answers = ("summary", "final_output", "report")

    sessions: Count = 20
    system: Tokens = 2000
    tools: Tokens = 8000
    repo_map: Tokens = 20000
    task: Range = Range(300, 800)
    turns: Range = Range(8, 14)  # answers with tool calls before the final answer
    parallel_calls: Range = Range(1, 4)  # tool calls in one answer
    tool_result: Range = Range(300, 2500)  # tokens of each tool's result
    compact_trigger: Tokens = 40000  # a prompt of this many tokens or more is compacted instead of sent
    summary: Range = Range(1500, 3000)  # the compaction's answer: what the new prompt starts from
    final_output: Range = Range(300, 800)
    # sub-agents: one answer (the spawn_at-th of the loop) delegates to this many children; 0 for none
    subagents: Range = Range(0, 0)
    spawn_at: Range = Range(2, 4)
    subagent_system: Tokens = 1500
    subagent_task: Range = Range(150, 400)  # the prompt of each delegate_task call: the child's first message
    subagent_turns: Range = Range(2, 5)  # each child's answers with tool calls before its report
    report: Range = Range(300, 1200)  # each child's final answer, returned to the parent
    concurrency: Levels = (5, 20)
    session_spacing_ms: Millis = 30_000
    # field-shaped sessions (module docstring); the defaults leave them out
    tasks: Range = Range(1, 1)  # tasks of a session, each a loop and a final answer, think time between them
    next_task: Range = Range(300, 800)  # tokens of each later task's message (the first is `task`)
    turn_strata: tuple[Stratum, ...] = ()  # when given, each session's turns come from its stratum, not `turns`
    edit_percent: Percent = 0  # tool answers that are one apply_patch call instead of parallel reads
    edit: Range = Range(150, 400)  # tokens of an edit's diff (cut at whole edits: near a draw, not exactly it)
    compact_keep: Literal["system", "opening"] = "system"  # what a compacted prompt keeps before the summary
    subagent_percent: Percent = 100  # sessions that delegate (when subagents is not {lo: 0, hi: 0})
    even_waits: bool = False  # the waits before later tasks at evenly spread quantiles of think_gap_ms, not drawn

    def __post_init__(self) -> None:
        super().__post_init__()
        self.require(self.turns.lo >= 1, "turns", "must be at least 1")
        self.require(self.parallel_calls.lo >= 1, "parallel_calls", "must be at least 1 call")
        self.require(self.tasks.lo >= 1, "tasks", "must be at least 1 task a session")
        if self.turn_strata:
            total = sum(st.percent for st in self.turn_strata)
            self.require(total == 100, "turn_strata", f"percents must add up to 100 (they add up to {total})")
            for st in self.turn_strata:
                self.require(st.turns.lo >= 1, "turn_strata", "turns must be at least 1 in every stratum")
        if self.edit_percent:
            self.require(self.edit.lo >= 1, "edit", "must be at least 1 token when edit_percent is above 0")
        if self.spawns_subagents:
            # a spawn that draws no children would be an answer with neither text nor calls
            self.require(self.subagents.lo >= 1, "subagents", "must be {lo: 0, hi: 0} (none) or at least 1")
            fewest = self.fewest_turns
            self.require(
                1 <= self.spawn_at.lo and self.spawn_at.hi <= fewest,
                "spawn_at",
                f"must name an answer of the loop, 1 to the fewest turns ({fewest})",
            )
            # a child that reports at once would be one request: a plain tool call, not a sub-agent
            self.require(self.subagent_turns.lo >= 1, "subagent_turns", "must be at least 1")
            most = shape(self).most
            self.require(
                most <= MOST_REQUESTS,
                "subagents",
                f"make sessions of up to {most} requests ({self.subagents.hi} sub-agents of up to "
                f"{self.subagent_turns.hi + 1} requests each, beside the loop); {MOST_REQUESTS_WHY}, so at most "
                f"{MOST_REQUESTS}: fewer sub-agents or subagent_turns",
            )
        kept = "system" if self.compact_keep == "system" else "opening: system, repo_map, task.hi"
        self.require(
            self.summary.hi + self.restart_base + 2 * _INSTRUCTIONS_BOUND < self.compact_trigger,
            "summary",
            f"must leave the new prompt ({kept} {self.restart_base} + summary + instructions) below "
            f"compact_trigger {self.compact_trigger}, or every request after a compaction compacts again",
        )
        if not self.spawns_subagents:  # with sub-agents, checked above (the loop's requests included)
            most = shape(self).most
            self.require(
                most <= MOST_REQUESTS,
                "turn_strata" if self.turn_strata else "tasks" if self.tasks.hi > 1 else "turns",
                f"make sessions of up to {most} requests; {MOST_REQUESTS_WHY}, so at most {MOST_REQUESTS}: fewer "
                "tasks or turns",
            )

    @property
    def spawns_subagents(self) -> bool:
        return self.subagents.hi > 0

    @property
    def fewest_turns(self) -> int:
        return min(st.turns.lo for st in self.turn_strata) if self.turn_strata else self.turns.lo

    @property
    def most_turns(self) -> int:
        return max(st.turns.hi for st in self.turn_strata) if self.turn_strata else self.turns.hi

    @property
    def restart_base(self) -> int:
        """Content tokens a compacted prompt keeps before the summary (at most)."""
        return self.system + (self.repo_map + self.task.hi if self.compact_keep == "opening" else 0)

    def session_turns(self, index: int) -> Range:
        """The range session `index` draws each task's turns from: its stratum's, or `turns`."""
        if not self.turn_strata:
            return self.turns
        at, edge = 100 * _position(index, _STRATA_STEP), 0
        for st in self.turn_strata:
            edge += st.percent
            if at < edge:
                return st.turns
        return self.turn_strata[-1].turns

    def session_spawns(self, index: int) -> bool:
        return self.spawns_subagents and 100 * _position(index, _SUBAGENT_STEP) < self.subagent_percent


@dataclass
class _Session:
    """One session being planned: what every request draws from, and its requests as recorded, in any order (the
    plan sorts them by start, as inference-perf does)."""

    composer: Composer
    rng: np.random.Generator
    vocab: Vocab
    spec: Spec
    blocks: ScenarioBlocks
    ticket: str
    prefix: str  # span ids start with it
    turns: list[Turn] = field(default_factory=list)
    read: set[str] = field(default_factory=set)  # files read so far: none twice

    @property
    def s(self) -> AgentLoopSpec:
        return cast(AgentLoopSpec, self.spec.scenarios[NAME])

    def chain(self, prefix: str, messages: tuple[Message, ...], start_ms: int) -> Chain:
        """A conversation of the session (the loop, or a sub-agent's), its requests recorded with the others."""
        return Chain(
            timing=self.spec.timing,
            catalog=self.blocks.catalog,
            prefix=prefix,
            messages=messages,
            start_ms=start_ms,
            after=(),
            turns=self.turns,
        )

    def tool_gap(self, output: Output) -> int:
        return gap(self.spec.timing, self.rng, output)  # the slowest of the tools: they run side by side

    def tool_turn(self) -> tuple[Output, list[Text]]:
        """One answer of k parallel calls and the k results the harness sends back, each a different file or
        query."""
        composer, rng, v, s = self.composer, self.rng, self.vocab, self.s
        if s.edit_percent and int(rng.integers(100)) < s.edit_percent:  # drawn only then: the other bytes stay
            return self.edit_turn()
        calls: list[ToolCall] = []
        results: list[Text] = []
        for _ in range(s.parallel_calls.draw(rng)):
            budget = s.tool_result.draw(rng)
            kind = v.index(3)
            if kind == 0:
                path = v.module_path()
                while path in self.read:
                    path = v.module_path()
                self.read.add(path)
                calls.append(make_call(composer, rng, "read_file", {"path": path}))
                results.append(numbered_code(composer, budget, rng))
            elif kind == 1:
                query = f"def {v.func_name()}|{v.class_name()}\\("
                calls.append(make_call(composer, rng, "search_code", {"query": query, "max_results": 50}))
                results.append(compose_block(composer, f"rg -n '{query}'\n", "search", budget, rng))
            else:
                target = f"tests/{v.noun()}/test_{v.noun()}.py"
                calls.append(make_call(composer, rng, "run_command", {"command": f"pytest -q {target}"}))
                results.append(compose_block(composer, f"$ pytest -q {target}\n", "logline", budget, rng))
        return Output(calls=tuple(calls)), results

    def edit_turn(self) -> tuple[Output, list[Text]]:
        """One apply_patch call whose diff is the answer, and the harness's one-line result."""
        composer, rng, v = self.composer, self.rng, self.vocab
        size = self.s.edit.draw(rng)
        path = v.module_path()
        code = composer.fill("code", 4 * size, rng).text  # room for the edits a diff of `size` tokens holds
        patch = make_patch(v, path, code, composer.chars_for(size, "code"))
        call = make_call(composer, rng, "apply_patch", {"path": patch.path, "patch": patch.diff})
        return Output(calls=(call,)), [composer.line(patch_summary(patch))]


def plan_sessions(
    composer: Composer, blocks: ScenarioBlocks, spec: Spec, *, seed: int, index: int
) -> list[SessionPlan]:
    s = cast(AgentLoopSpec, spec.scenarios[NAME])
    rng = session_rng(seed, SCENARIO_ID, index)
    v = Vocab(rng)
    ticket = ticket_name(v)
    task = compose_block(
        composer,
        f"Task {ticket}: find why {v.func_name()} drops {v.noun()} updates and fix it; run the tests you touch.\n",
        "prose",
        s.task.draw(rng),
        rng,
    )
    turns_range = s.session_turns(index)
    first_turns = turns_range.draw(rng)
    spawn_step = s.spawn_at.draw(rng) - 1 if s.session_spawns(index) else -1  # drawn only then: the other bytes stay
    tasks = s.tasks.draw(rng) if s.tasks.hi > 1 else 1
    compactions = 0
    session = _Session(composer, rng, v, spec, blocks, ticket, f"{DIRECTORY}-{index:04d}")
    opening: tuple[Message, ...] = (blocks.system, blocks.repo_map, user(task))
    kept = opening if s.compact_keep == "opening" else (blocks.system,)
    loop = session.chain(session.prefix, opening, index * s.session_spacing_ms)

    for job in range(tasks):
        if job:  # the human reads the answer, then asks for the next thing on the same conversation
            ask = compose_block(
                composer,
                f"Next, on {ticket}: {v.verb()} the {v.noun()} {v.noun()} the same way and check it.\n",
                "prose",
                s.next_task.draw(rng),
                rng,
            )
            loop.add(user(ask))
        loop_turns = turns_range.draw(rng) if job else first_turns
        for step in range(loop_turns + 1):
            if loop.prompt_tokens() >= s.compact_trigger:
                summary = Output(
                    compose_block(composer, f"Summary of {ticket} so far:\n", "prose", s.summary.draw(rng), rng)
                )
                loop.add(user(composer.line(_COMPACT)))
                loop.send(summary, role=COMPACTION)
                think = spec.timing.think_gap_ms.draw(rng)
                assert summary.text is not None
                compactions += 1
                resume = composer.line(_CONTINUE.format(ticket=ticket, n=compactions))
                loop.restart(kept + (assistant_text(summary.text), user(resume)), gap=think)
            if step == loop_turns:
                final = Output(
                    compose_block(
                        composer, f"{ticket} is fixed. What changed:\n", "prose", s.final_output.draw(rng), rng
                    )
                )
                loop.send(final)
                if job + 1 < tasks:
                    loop.carry(gap=_even_wait(spec, index, job) if s.even_waits else spec.timing.think_gap_ms.draw(rng))
                break
            if job == 0 and step == spawn_step:
                _fan_out(session, loop)
                continue
            output, results = session.tool_turn()
            loop.send(output)
            loop.carry(results, gap=session.tool_gap(output))
    turns = tuple(sorted(session.turns, key=lambda turn: (turn.start_ms, turn.span_id)))  # inference-perf's order
    return [SessionPlan(DIRECTORY, session.prefix, index, blocks.catalog, turns)]


def _fan_out(session: _Session, loop: Chain) -> None:
    """The loop's next request spawns sub-agents that run side by side; the loop goes on (the join) when the last
    report is in, carrying the spawning answer and the k reports, and the outputs of the spawn and of each child's
    report."""
    composer, rng, v, s, blocks = session.composer, session.rng, session.vocab, session.s, session.blocks
    assert blocks.subagent_system is not None
    prompts, calls = [], []
    for c in range(1, s.subagents.draw(rng) + 1):
        about = f"{v.verb()} {v.noun()} {v.noun()}"
        opening = (
            f"Sub-task {c} of {session.ticket}: {about}. Find every place in the code that bears on it and report "
            "back.\n"
        )
        prompt = compose_block(composer, opening, "prose", s.subagent_task.draw(rng), rng)
        prompts.append(prompt)
        calls.append(make_call(composer, rng, DELEGATE, {"description": about, "prompt": prompt.text}))
    spawn = loop.send(Output(calls=tuple(calls)))  # the children start as it ends
    reports: list[Text] = []
    lasts: list[str] = []
    join = spawn.end_ms
    for c, prompt in enumerate(prompts, start=1):
        child = session.chain(f"{spawn.span_id}-a{c}", (blocks.subagent_system, user(prompt)), spawn.end_ms)
        # a child's first request carries no output of the parent's: it is timed after the spawn; its later ones
        # continue its own, and may also be timed after a sibling's (inference-perf's one timing edge)
        follows = spawn.span_id
        tool_turns = s.subagent_turns.draw(rng)
        for _ in range(tool_turns):
            output, results = session.tool_turn()
            child.send(output, role=SUBAGENT, follows=follows)
            child.carry(results, gap=session.tool_gap(output))
            follows = FOLLOWS_ANY
        opening = f"Report on sub-task {c} of {session.ticket}:\n"
        report = compose_block(composer, opening, "prose", s.report.draw(rng), rng)
        last = child.send(Output(report), role=SUBAGENT, follows=follows)
        reports.append(report)
        lasts.append(last.span_id)
        join = max(join, last.end_ms)
    # the reports as the harness returns them, and hidden in the spawning message for inference-perf's builder only
    hidden = "Reports of the sub-agents:\n" + "".join(f"{r.text}\n" for r in reports)
    results = [composer.join([r, composer.line(f"(sub-agent {c} finished)\n")]) for c, r in enumerate(reports, 1)]
    loop.add(
        assistant_calls(spawn.output.calls, hidden=hidden),
        *(tool_result(o, r) for o, r in zip(spawn.output.calls, results)),
    )
    loop.start_ms, loop.after = join, (spawn.span_id, *lasts)


def _calls_bound(s: AgentLoopSpec) -> int:
    """The most tokens one answer of tool calls adds to a prompt: its calls and their results."""
    reads = s.parallel_calls.hi * (CALL_TOKENS_BOUND + s.tool_result.hi)
    return max(reads, _edit_bound(s) + _EDIT_RESULT_BOUND) if s.edit_percent else reads


def _edit_bound(s: AgentLoopSpec) -> int:
    """The most tokens an edit's call records (its diff is cut near its draw, so twice the draw bounds it)."""
    return CALL_TOKENS_BOUND + 2 * s.edit.hi


def _step_bound(s: AgentLoopSpec) -> int:
    """The most tokens one answer adds to the parent's prompt: its calls and their results, the sub-agents', or a
    final answer and the next task."""
    grows = [_calls_bound(s)]
    if s.spawns_subagents:
        grows.append(s.subagents.hi * (CALL_TOKENS_BOUND + s.subagent_task.hi + s.report.hi + _INSTRUCTIONS_BOUND))
    if s.tasks.hi > 1:
        grows.append(s.final_output.hi + s.next_task.hi + _INSTRUCTIONS_BOUND)
    return max(grows)


def largest_requests(spec: Spec) -> list[Request]:
    s = cast(AgentLoopSpec, spec.scenarios[NAME])
    # a prompt below the trigger, plus one turn's growth, plus the instruction: the compaction request (or, without
    # a compaction in reach, the whole session's prompt)
    whole_loop = (
        s.system
        + s.tools
        + s.repo_map
        + s.task.hi
        + s.tasks.hi * s.most_turns * _step_bound(s)
        + (s.tasks.hi - 1) * (s.final_output.hi + s.next_task.hi + _INSTRUCTIONS_BOUND)
    )
    prompt = min(whole_loop, s.compact_trigger - 1 + _step_bound(s)) + _INSTRUCTIONS_BOUND
    messages = 4 + s.tasks.hi * (2 + s.most_turns * (1 + max(s.parallel_calls.hi, s.subagents.hi)))
    tool_turn = max(TOOL_CALL_MIN_MAX_TOKENS, s.summary.hi, 4 * _edit_bound(s) if s.edit_percent else 0)
    largest = [
        Request("agent_loop compaction or tool turn", prompt, tool_turn, messages),
        Request("agent_loop final answer", prompt, s.final_output.hi, messages),
    ]
    if s.spawns_subagents:
        spawned = s.subagents.hi * (CALL_TOKENS_BOUND + s.subagent_task.hi)
        largest.append(Request("agent_loop spawn", prompt, max(TOOL_CALL_MIN_MAX_TOKENS, 4 * spawned), messages))
        child = s.subagent_system + s.tools + s.subagent_task.hi + s.subagent_turns.hi * _calls_bound(s)
        child_messages = 2 + s.subagent_turns.hi * (1 + s.parallel_calls.hi)
        largest.append(
            Request(
                "agent_loop sub-agent", child, max(TOOL_CALL_MIN_MAX_TOKENS, s.report.hi, tool_turn), child_messages
            )
        )
    return largest


def config_entries(spec: Spec) -> list[ConfigEntry]:
    s = cast(AgentLoopSpec, spec.scenarios[NAME])
    return [
        ConfigEntry(
            f"{NAME}/c{level}.yml",
            DIRECTORY,
            level,
            s.sessions,
            shape(s).most,  # inference-perf queues all of a session's requests at once, each holding a slot
            about=f"c{level}: {level} sessions in flight at a time, {s.sessions} in all, each "
            + (f"{s.tasks.lo}-{s.tasks.hi} tasks, each " if s.tasks.hi > 1 else "")
            + f"a tool loop of {s.fewest_turns}-{s.most_turns} answers of {s.parallel_calls.lo}-{s.parallel_calls.hi} "
            "parallel calls"
            + (f" or one edit ({s.edit_percent}%)" if s.edit_percent else "")
            + (f", one of them spawning {s.subagents.lo}-{s.subagents.hi} sub-agents" if s.spawns_subagents else "")
            + (f" in {s.subagent_percent}% of the sessions" if s.spawns_subagents and s.subagent_percent < 100 else ""),
        )
        for level in s.concurrency
    ]


def _compactions_bound(sc: AgentLoopSpec, requests: int) -> int:
    """The most compactions `requests` requests of the main agent can hold: after one, the prompt (at most the
    catalog, what is kept, the summary and the instruction) must grow to compact_trigger again, by at most one
    step's growth a request."""
    restart = sc.tools + sc.restart_base + sc.summary.hi + 2 * _INSTRUCTIONS_BOUND
    between = max(1, -(-(sc.compact_trigger - restart) // _step_bound(sc)))
    return min(requests, 1 + requests // between)


def shape(sc: AgentLoopSpec) -> Shape:
    """Each task's loop and final answer, the compactions they can hold, and the sub-agents' requests; each
    request's edges are the ones its span states (`fastgen.after`)."""
    requests = sc.tasks.hi * (sc.most_turns + 1)
    fewest, most = sc.tasks.lo * (sc.fewest_turns + 1), requests + _compactions_bound(sc, requests)
    if sc.spawns_subagents:
        fewest += sc.subagents.lo * (sc.subagent_turns.lo + 1) if sc.subagent_percent == 100 else 0
        most += sc.subagents.hi * (sc.subagent_turns.hi + 1)
    return Shape(fewest, most, "chain", restart_kind=COMPACTION)


SCENARIO = Scenario(
    id=SCENARIO_ID,
    name=NAME,
    spec_type=AgentLoopSpec,
    layouts=(DIRECTORY,),
    shape=shape,
    plan=plan_sessions,
    largest_requests=largest_requests,
    configs=config_entries,
)
