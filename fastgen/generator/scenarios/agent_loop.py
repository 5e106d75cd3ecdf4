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

Gaps between requests are the workload's timing: a tool-call answer is followed by the slowest of its k tools
(tool_exec_ms, drawn k times), a text answer by think time (think_gap_ms); either may be log-normal.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

import numpy as np

from ..blocks import ScenarioBlocks
from ..content.budget import compose_block, numbered_code
from ..content.compose import Composer, Text
from ..content.vocab import Vocab
from ..messages import Message, Output, SessionPlan, ToolCall, Turn, assistant_text, tool_result, user
from ..spec import TOOL_CALL_MIN_MAX_TOKENS, Count, Levels, Millis, Range, ScenarioSpec, Spec, Tokens
from ..streams import session_rng
from .base import ConfigEntry, Request, Scenario, Shape
from .common import CALL_TOKENS_BOUND, duration_ms, make_call, ticket_name

__all__ = ["SCENARIO", "AgentLoopSpec", "plan_sessions"]

SCENARIO_ID = 4
NAME = DIRECTORY = "agent_loop"
_COMPACT = "Context is nearly full. Summarize the session so far: the task, what you read and found, what is left.\n"
# the compaction's number keeps two restarts of one session apart (their other messages are the same)
_CONTINUE = "Continue {ticket} from your summary above (context compacted {n} times so far).\n"
COMPACTION = "compaction"  # the turn kind of a compaction request (fastgen.turn_kind in its span)
_INSTRUCTIONS_BOUND = 40  # tokens of either instruction above, for the up-front window check


@dataclass(frozen=True)
class AgentLoopSpec(ScenarioSpec):
    """A tool loop of `turns` answers of parallel calls and a final answer, compacting at `compact_trigger`."""

    not_tokens = frozenset({"turns", "parallel_calls", "session_spacing_ms"})
    answers = ("summary", "final_output")

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
    concurrency: Levels = (5, 20)
    session_spacing_ms: Millis = 30_000

    def __post_init__(self) -> None:
        super().__post_init__()
        self.require(self.turns.lo >= 1, "turns", "must be at least 1")
        self.require(self.parallel_calls.lo >= 1, "parallel_calls", "must be at least 1 call")
        self.require(
            self.summary.hi + self.system + 2 * _INSTRUCTIONS_BOUND < self.compact_trigger,
            "summary",
            f"must leave the new prompt (system {self.system} + summary + instructions) below compact_trigger "
            f"{self.compact_trigger}, or every request after a compaction compacts again",
        )


def _tool_turn(
    composer: Composer, rng: np.random.Generator, v: Vocab, s: AgentLoopSpec, read: set[str]
) -> tuple[Output, list[Text]]:
    """One answer of k parallel calls and the k results the harness sends back, each a different file or query."""
    calls: list[ToolCall] = []
    results: list[Text] = []
    for _ in range(s.parallel_calls.draw(rng)):
        budget = s.tool_result.draw(rng)
        kind = v.index(3)
        if kind == 0:
            path = v.module_path()
            while path in read:
                path = v.module_path()
            read.add(path)
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
    read: set[str] = set()
    compactions = 0
    catalog_tokens = blocks.catalog.tokens
    messages: tuple[Message, ...] = (blocks.system, blocks.repo_map, user(task))
    turns: list[Turn] = []
    t = index * s.session_spacing_ms

    def prompt_tokens(messages: tuple[Message, ...]) -> int:
        return catalog_tokens + sum(m.tokens for m in messages)

    def send(messages: tuple[Message, ...], output: Output, role: str = "") -> int:
        """Record one request at time t; the time its answer ends."""
        end = t + duration_ms(spec.timing, prompt_tokens(messages), output.tokens)
        number = len(turns) + 1
        turns.append(Turn(f"{DIRECTORY}-{index:04d}-t{number}", number, messages, output, t, end, role))
        return end

    for step in range(loop_turns + 1):
        if prompt_tokens(messages) >= s.compact_trigger:
            summary = Output(
                compose_block(composer, f"Summary of {ticket} so far:\n", "prose", s.summary.draw(rng), rng)
            )
            t = send(messages + (user(composer.line(_COMPACT)),), summary, COMPACTION) + spec.timing.think_gap_ms.draw(
                rng
            )
            assert summary.text is not None
            compactions += 1
            resume = composer.line(_CONTINUE.format(ticket=ticket, n=compactions))
            messages = (blocks.system, assistant_text(summary.text), user(resume))
        if step == loop_turns:
            final = compose_block(
                composer, f"{ticket} is fixed. What changed:\n", "prose", s.final_output.draw(rng), rng
            )
            send(messages, Output(final))
            break
        output, results = _tool_turn(composer, rng, v, s, read)
        end = send(messages, output)
        t = end + max(spec.timing.tool_exec_ms.draw(rng) for _ in output.calls)  # the tools run side by side
        messages = messages + (output.as_history(), *(tool_result(c, r) for c, r in zip(output.calls, results)))
    return [SessionPlan(DIRECTORY, f"{DIRECTORY}-{index:04d}", index, blocks.catalog, tuple(turns))]


def _step_bound(s: AgentLoopSpec) -> int:
    """The most tokens one tool turn adds to the prompt: its calls and their results."""
    return s.parallel_calls.hi * (CALL_TOKENS_BOUND + s.tool_result.hi)


def largest_requests(spec: Spec) -> list[Request]:
    s = cast(AgentLoopSpec, spec.scenarios[NAME])
    # a prompt below the trigger, plus one turn's growth, plus the instruction: the compaction request (or, without
    # a compaction in reach, the whole loop's prompt)
    whole_loop = s.system + s.tools + s.repo_map + s.task.hi + s.turns.hi * _step_bound(s)
    prompt = min(whole_loop, s.compact_trigger - 1 + _step_bound(s)) + _INSTRUCTIONS_BOUND
    messages = 4 + s.turns.hi * (1 + s.parallel_calls.hi)
    return [
        Request("agent_loop compaction or tool turn", prompt, max(TOOL_CALL_MIN_MAX_TOKENS, s.summary.hi), messages),
        Request("agent_loop final answer", prompt, s.final_output.hi, messages),
    ]


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
            f"{s.turns.lo}-{s.turns.hi} answers of {s.parallel_calls.lo}-{s.parallel_calls.hi} parallel calls",
        )
        for level in s.concurrency
    ]


def shape(sc: AgentLoopSpec) -> Shape:
    # the loop, the final answer, and at most one compaction before each of them
    return Shape(sc.turns.lo + 1, 2 * (sc.turns.hi + 1), "chain", restart_kind=COMPACTION)


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
