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
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import cast

import numpy as np

from ..blocks import ScenarioBlocks
from ..content.budget import compose_block, numbered_code
from ..content.compose import Composer, Text
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
from ..spec import TOOL_CALL_MIN_MAX_TOKENS, Count, Levels, Millis, Range, ScenarioSpec, Spec, Tokens
from ..streams import session_rng
from ..tools import DELEGATE
from .base import MOST_REQUESTS, ConfigEntry, Request, Scenario, Shape
from .common import CALL_TOKENS_BOUND, duration_ms, make_call, ticket_name

__all__ = ["SCENARIO", "AgentLoopSpec", "plan_sessions"]

SCENARIO_ID = 4
NAME = DIRECTORY = "agent_loop"
_COMPACT = "Context is nearly full. Summarize the session so far: the task, what you read and found, what is left.\n"
# the compaction's number keeps two restarts of one session apart (their other messages are the same)
_CONTINUE = "Continue {ticket} from your summary above (context compacted {n} times so far).\n"
COMPACTION = "compaction"  # the turn kind of a compaction request (fastgen.turn_kind in its span)
SUBAGENT = "subagent"  # the turn kind of a sub-agent's request
_INSTRUCTIONS_BOUND = 40  # tokens of either instruction above (or a report's footer), for the up-front window check


@dataclass(frozen=True)
class AgentLoopSpec(ScenarioSpec):
    """A tool loop of `turns` answers of parallel calls and a final answer, compacting at `compact_trigger`."""

    not_tokens = frozenset({"turns", "parallel_calls", "session_spacing_ms", "subagents", "spawn_at", "subagent_turns"})
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

    def __post_init__(self) -> None:
        super().__post_init__()
        self.require(self.turns.lo >= 1, "turns", "must be at least 1")
        self.require(self.parallel_calls.lo >= 1, "parallel_calls", "must be at least 1 call")
        if self.spawns_subagents:
            # a spawn that draws no children would be an answer with neither text nor calls
            self.require(self.subagents.lo >= 1, "subagents", "must be {lo: 0, hi: 0} (none) or at least 1")
            self.require(
                1 <= self.spawn_at.lo and self.spawn_at.hi <= self.turns.lo,
                "spawn_at",
                f"must name an answer of the loop, 1 to turns.lo ({self.turns.lo})",
            )
            # a child that reports at once would be one request: a plain tool call, not a sub-agent
            self.require(self.subagent_turns.lo >= 1, "subagent_turns", "must be at least 1")
            most = shape(self).most
            self.require(
                most <= MOST_REQUESTS,
                "subagents",
                f"make sessions of up to {most} requests ({self.subagents.hi} sub-agents of up to "
                f"{self.subagent_turns.hi + 1} requests each, beside the loop); inference-perf queues a session's "
                f"requests at once, so at most {MOST_REQUESTS}: fewer sub-agents or subagent_turns",
            )
        self.require(
            self.summary.hi + self.system + 2 * _INSTRUCTIONS_BOUND < self.compact_trigger,
            "summary",
            f"must leave the new prompt (system {self.system} + summary + instructions) below compact_trigger "
            f"{self.compact_trigger}, or every request after a compaction compacts again",
        )

    @property
    def spawns_subagents(self) -> bool:
        return self.subagents.hi > 0


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

    def send(
        self,
        span: str,
        number: int,
        messages: tuple[Message, ...],
        output: Output,
        start: int,
        *,
        role: str = "",
        after: tuple[str, ...] = (),
        follows: str = "",
    ) -> int:
        """Record one request; the time its answer ends."""
        end = start + duration_ms(self.spec.timing, self.prompt_tokens(messages), output.tokens)
        self.turns.append(Turn(f"{self.prefix}-{span}", number, messages, output, start, end, role, after, follows))
        return end

    def prompt_tokens(self, messages: tuple[Message, ...]) -> int:
        return self.blocks.catalog.tokens + sum(m.tokens for m in messages)

    def tool_gap(self, output: Output) -> int:
        return max(self.spec.timing.tool_exec_ms.draw(self.rng) for _ in output.calls)  # the tools run side by side

    def tool_turn(self) -> tuple[Output, list[Text]]:
        """One answer of k parallel calls and the k results the harness sends back, each a different file or
        query."""
        composer, rng, v, s = self.composer, self.rng, self.vocab, self.s
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


def _with_results(messages: tuple[Message, ...], output: Output, results: list[Text]) -> tuple[Message, ...]:
    return messages + (output.as_history(), *(tool_result(c, r) for c, r in zip(output.calls, results)))


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
    loop_turns = s.turns.draw(rng)
    spawn_step = s.spawn_at.draw(rng) - 1 if s.spawns_subagents else -1  # drawn only then: the other bytes stay
    compactions = 0
    session = _Session(composer, rng, v, spec, blocks, ticket, f"{DIRECTORY}-{index:04d}")
    messages: tuple[Message, ...] = (blocks.system, blocks.repo_map, user(task))
    after: tuple[str, ...] = ()  # the requests whose outputs end the history: what the next request carries
    t = index * s.session_spacing_ms

    for step in range(loop_turns + 1):
        number = sum(turn.role != SUBAGENT for turn in session.turns) + 1
        if session.prompt_tokens(messages) >= s.compact_trigger:
            summary = Output(
                compose_block(composer, f"Summary of {ticket} so far:\n", "prose", s.summary.draw(rng), rng)
            )
            request = messages + (user(composer.line(_COMPACT)),)
            end = session.send(f"t{number}", number, request, summary, t, role=COMPACTION, after=after)
            t = end + spec.timing.think_gap_ms.draw(rng)
            assert summary.text is not None
            compactions += 1
            resume = composer.line(_CONTINUE.format(ticket=ticket, n=compactions))
            messages = (blocks.system, assistant_text(summary.text), user(resume))
            after = (session.turns[-1].span_id,)
            number += 1
        if step == loop_turns:
            final = compose_block(
                composer, f"{ticket} is fixed. What changed:\n", "prose", s.final_output.draw(rng), rng
            )
            session.send(f"t{number}", number, messages, Output(final), t, after=after)
            break
        if step == spawn_step:
            t, added, after = _fan_out(session, messages, t, number, after)
            messages = messages + added
            continue
        output, results = session.tool_turn()
        end = session.send(f"t{number}", number, messages, output, t, after=after)
        t = end + session.tool_gap(output)
        messages = _with_results(messages, output, results)
        after = (session.turns[-1].span_id,)
    turns = tuple(sorted(session.turns, key=lambda turn: (turn.start_ms, turn.span_id)))  # inference-perf's order
    return [SessionPlan(DIRECTORY, session.prefix, index, blocks.catalog, turns)]


def _fan_out(
    session: _Session, messages: tuple[Message, ...], t: int, number: int, after: tuple[str, ...]
) -> tuple[int, tuple[Message, ...], tuple[str, ...]]:
    """The spawning request (number `number`, at t, carrying `after`) and its children side by side: (the join's
    start, the messages the join adds to the parent's history, the span ids the join carries the outputs of: the
    spawn's, then each child's report's)."""
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
    spawn = Output(calls=tuple(calls))
    spawn_id = f"t{number}"
    start = session.send(spawn_id, number, messages, spawn, t, after=after)  # the children start as it ends
    reports: list[Text] = []
    lasts: list[str] = []
    join = start
    for c, prompt in enumerate(prompts, start=1):
        history: tuple[Message, ...] = (blocks.subagent_system, user(prompt))
        ct = start
        # a child's first request carries no output of the parent's: it is timed after the spawn; its later ones
        # continue its own, and may also be timed after a sibling's (inference-perf's one timing edge)
        child_after: tuple[str, ...] = ()
        follows = f"{session.prefix}-{spawn_id}"
        tool_turns = s.subagent_turns.draw(rng)
        for k in range(1, tool_turns + 2):
            span = f"{spawn_id}-a{c}-t{k}"
            if k > tool_turns:
                opening = f"Report on sub-task {c} of {session.ticket}:\n"
                report = compose_block(composer, opening, "prose", s.report.draw(rng), rng)
                end = session.send(
                    span, k, history, Output(report), ct, role=SUBAGENT, after=child_after, follows=follows
                )
                reports.append(report)
                lasts.append(session.turns[-1].span_id)
                join = max(join, end)
                break
            output, results = session.tool_turn()
            ct = session.send(span, k, history, output, ct, role=SUBAGENT, after=child_after, follows=follows)
            ct += session.tool_gap(output)
            history = _with_results(history, output, results)
            child_after, follows = (session.turns[-1].span_id,), FOLLOWS_ANY
    # the reports as the harness returns them, and hidden in the spawning message for inference-perf's builder only
    hidden = "Reports of the sub-agents:\n" + "".join(f"{r.text}\n" for r in reports)
    results = [composer.join([r, composer.line(f"(sub-agent {c} finished)\n")]) for c, r in enumerate(reports, 1)]
    added = (assistant_calls(spawn.calls, hidden=hidden), *(tool_result(o, r) for o, r in zip(spawn.calls, results)))
    return join, added, (f"{session.prefix}-{spawn_id}", *lasts)


def _calls_bound(s: AgentLoopSpec) -> int:
    """The most tokens one answer of tool calls adds to a prompt: its calls and their results."""
    return s.parallel_calls.hi * (CALL_TOKENS_BOUND + s.tool_result.hi)


def _step_bound(s: AgentLoopSpec) -> int:
    """The most tokens one answer adds to the parent's prompt: its calls and their results, or the sub-agents'."""
    if not s.spawns_subagents:
        return _calls_bound(s)
    spawn = s.subagents.hi * (CALL_TOKENS_BOUND + s.subagent_task.hi + s.report.hi + _INSTRUCTIONS_BOUND)
    return max(_calls_bound(s), spawn)


def largest_requests(spec: Spec) -> list[Request]:
    s = cast(AgentLoopSpec, spec.scenarios[NAME])
    # a prompt below the trigger, plus one turn's growth, plus the instruction: the compaction request (or, without
    # a compaction in reach, the whole loop's prompt)
    whole_loop = s.system + s.tools + s.repo_map + s.task.hi + s.turns.hi * _step_bound(s)
    prompt = min(whole_loop, s.compact_trigger - 1 + _step_bound(s)) + _INSTRUCTIONS_BOUND
    messages = 4 + s.turns.hi * (1 + max(s.parallel_calls.hi, s.subagents.hi))
    largest = [
        Request("agent_loop compaction or tool turn", prompt, max(TOOL_CALL_MIN_MAX_TOKENS, s.summary.hi), messages),
        Request("agent_loop final answer", prompt, s.final_output.hi, messages),
    ]
    if s.spawns_subagents:
        spawned = s.subagents.hi * (CALL_TOKENS_BOUND + s.subagent_task.hi)
        largest.append(Request("agent_loop spawn", prompt, max(TOOL_CALL_MIN_MAX_TOKENS, 4 * spawned), messages))
        child = s.subagent_system + s.tools + s.subagent_task.hi + s.subagent_turns.hi * _calls_bound(s)
        child_messages = 2 + s.subagent_turns.hi * (1 + s.parallel_calls.hi)
        largest.append(
            Request("agent_loop sub-agent", child, max(TOOL_CALL_MIN_MAX_TOKENS, s.report.hi), child_messages)
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
            about=f"c{level}: {level} sessions in flight at a time, {s.sessions} in all, each a tool loop of "
            f"{s.turns.lo}-{s.turns.hi} answers of {s.parallel_calls.lo}-{s.parallel_calls.hi} parallel calls"
            + (f", one of them spawning {s.subagents.lo}-{s.subagents.hi} sub-agents" if s.spawns_subagents else ""),
        )
        for level in s.concurrency
    ]


def shape(sc: AgentLoopSpec) -> Shape:
    """The loop, the final answer, at most one compaction before each of them, and the sub-agents' requests; each
    request's edges are the ones its span states (`fastgen.after`)."""
    fewest, most = sc.turns.lo + 1, 2 * (sc.turns.hi + 1)
    if sc.spawns_subagents:
        fewest += sc.subagents.lo * (sc.subagent_turns.lo + 1)
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
