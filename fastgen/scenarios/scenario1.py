"""Scenario 1: a 6-turn debug-fix-verify agent loop; turns 3 and 5 answer with an apply_patch tool call.

    T1 [system, repo map, file context, bug report]      -> analysis
    T2 + analysis + "inspect the tests"                  -> inspection plan
    T3 + plan + test logs                                -> apply_patch(...)
    T4 + apply_patch call + tool result (patch applied)  -> explanation
    T5 + explanation + failing tests                     -> apply_patch(...) revised
    T6 + apply_patch call + tool result (passing tests)  -> summary

Each turn's input is the previous input plus the previous output plus one new message, so inference-perf builds a
linear chain with SHARED, OUTPUT, UNIQUE segments, and the live tool call is fed forward by its id.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..blocks import ScenarioBlocks
from ..content.budget import compose_block, file_sections
from ..content.compose import Composer, Text
from ..content.vocab import Vocab
from ..messages import Message, Output, SessionPlan, Turn, tool_result, user
from ..spec import TOOL_CALL_MIN_MAX_TOKENS, Count, Levels, Millis, Range, ScenarioSpec, Spec, Tokens
from ..streams import session_rng
from .base import ConfigEntry, Request, Scenario, Shape
from .common import CALL_TOKENS_BOUND, duration_ms, make_call

__all__ = ["SCENARIO", "Scenario1Spec", "plan_sessions"]

SCENARIO_ID = 1
NAME = DIRECTORY = "scenario1"
EVENTS = 6  # the design's turn shape: six turns, one request each
TOOL_EVENTS = frozenset({2, 4})  # turns 3 and 5 call apply_patch


@dataclass(frozen=True)
class Scenario1Spec(ScenarioSpec):
    """Multi-turn agent loop: 6 turns, turns 3 and 5 are apply_patch tool calls."""

    not_tokens = frozenset({"session_spacing_ms"})
    answers = ("analysis", "inspection_plan", "patch", "explanation", "summary")

    sessions: Count = 100
    system: Tokens = 2000
    tools: Tokens = 8000
    repo_map: Tokens = 40000
    file_context: Tokens = 15000
    bug_report: Range = Range(900, 1100)
    analysis: Range = Range(800, 1200)
    inspect_request: Range = Range(40, 80)
    inspection_plan: Range = Range(500, 800)
    test_logs: Range = Range(1000, 3000)
    patch: Range = Range(150, 400)
    patch_result: Range = Range(40, 120)
    explanation: Range = Range(500, 1000)
    failing_tests: Range = Range(2000, 3000)
    passing_tests: Range = Range(300, 800)
    summary: Range = Range(500, 1000)
    concurrency: Levels = (1, 10, 25, 50, 100)
    session_spacing_ms: Millis = 120_000



def _patch_call(composer: Composer, rng, path: str, budget: int):
    head = composer.line(f"--- a/{path}\n")
    head2 = composer.line(f"+++ b/{path}\n")
    diff = composer.join([head, head2, composer.fill("diff", max(budget - head.tokens - head2.tokens, 1), rng)])
    return make_call(composer, rng, "apply_patch", {"path": path, "patch": diff.text})


def _patch_applied(composer: Composer, rng, path: str, budget: int) -> Text:
    v = Vocab(rng)
    return compose_block(composer, f"Patch applied to {path}: {v.number(1, 4)} hunk(s), "
                                   f"+{v.number(2, 40)} -{v.number(1, 30)} lines.\n", "logline", budget, rng)


def plan_sessions(composer: Composer, blocks: ScenarioBlocks, spec: Spec, *, seed: int,
                  index: int) -> list[SessionPlan]:
    s: Scenario1Spec = spec.scenarios[NAME]
    rng = session_rng(seed, SCENARIO_ID, index)
    v = Vocab(rng)
    ticket = f"{v.team().upper()}-{v.number(1000, 99999)}"
    target = v.module_path()

    files = file_sections(composer, rng, header="Files relevant to the bug report:\n", budget=s.file_context,
                          files=int(rng.integers(3, 7)))
    bug = compose_block(composer, f"Bug report {ticket}: {v.func_name()} returns a stale {v.noun()} under "
                                  f"concurrent {v.noun()} updates (see {target}).\n", "prose", s.bug_report.draw(rng), rng)
    analysis = Output(composer.fill("prose", s.analysis.draw(rng), rng))
    inspect = compose_block(composer, f"Before changing {target}, inspect the tests that cover it and tell me which "
                                      f"ones should catch {ticket}.\n", "prose", s.inspect_request.draw(rng), rng)
    plan = Output(composer.fill("plan", s.inspection_plan.draw(rng), rng))
    logs = compose_block(composer, f"Output of `pytest -x tests/ -k {v.noun()}`:\n", "pytest", s.test_logs.draw(rng), rng)
    patch1 = Output(calls=(_patch_call(composer, rng, target, s.patch.draw(rng)),))
    applied1 = _patch_applied(composer, rng, target, s.patch_result.draw(rng))
    explanation = Output(composer.fill("prose", s.explanation.draw(rng), rng))
    failing = compose_block(composer, "I ran the full suite after your patch; these tests still fail:\n", "pytest",
                            s.failing_tests.draw(rng), rng)
    patch2 = Output(calls=(_patch_call(composer, rng, target, s.patch.draw(rng)),))
    applied2 = composer.join([_patch_applied(composer, rng, target, s.patch_result.draw(rng)),
                              compose_block(composer, "$ pytest -q\n", "pytest", s.passing_tests.draw(rng), rng)])
    summary = Output(composer.fill("prose", s.summary.draw(rng), rng))

    # (the message this turn adds after the previous output, the output of this turn)
    steps: list[tuple[Message | None, Output]] = [
        (None, analysis),
        (user(inspect), plan),
        (user(logs), patch1),
        (tool_result(patch1.calls[0], applied1), explanation),
        (user(failing), patch2),
        (tool_result(patch2.calls[0], applied2), summary),
    ]
    turns: list[Turn] = []
    t = index * s.session_spacing_ms
    messages: tuple[Message, ...] = (blocks.system, blocks.repo_map, user(files), user(bug))
    prev_output: Output | None = None
    for number, (new_message, output) in enumerate(steps, start=1):
        if prev_output is not None:
            messages = messages + (prev_output.as_history(), new_message)
        tokens_in = blocks.catalog.tokens + sum(m.tokens for m in messages)
        end = t + duration_ms(spec.timing, tokens_in, output.tokens)
        turns.append(Turn(f"{DIRECTORY}-{index:04d}-t{number}", number, messages, output, t, end))
        gap = spec.timing.tool_exec_ms if output.is_tool_call else spec.timing.think_gap_ms
        t = end + gap.draw(rng)
        prev_output = output
    return [SessionPlan(DIRECTORY, f"{DIRECTORY}-{index:04d}", index, blocks.catalog, tuple(turns))]


def largest_requests(spec: Spec) -> list[Request]:
    s: Scenario1Spec = spec.scenarios[NAME]
    call = CALL_TOKENS_BOUND
    t5 = (s.tools + s.system + s.repo_map + s.file_context + s.bug_report.hi + s.analysis.hi + s.inspect_request.hi
          + s.inspection_plan.hi + s.test_logs.hi + s.patch.hi + call + s.patch_result.hi + s.explanation.hi
          + s.failing_tests.hi)
    t6 = t5 + s.patch.hi + call + s.patch_result.hi + s.passing_tests.hi
    return [Request("scenario 1 turn 5", t5, TOOL_CALL_MIN_MAX_TOKENS, 12),
            Request("scenario 1 turn 6", t6, s.summary.hi, 14)]


def config_entries(spec: Spec) -> list[ConfigEntry]:
    s: Scenario1Spec = spec.scenarios[NAME]
    return [ConfigEntry(f"{NAME}/c{level}.yml", DIRECTORY, level, s.sessions, EVENTS,
                        about=f"c{level}: {level} sessions in flight at a time (the next starts when one ends), "
                              f"{s.sessions} in all, each a chain of {EVENTS} requests")
            for level in s.concurrency]


def shape(sc: Scenario1Spec) -> Shape:
    return Shape(EVENTS, EVENTS, "chain", TOOL_EVENTS)


SCENARIO = Scenario(id=SCENARIO_ID, name=NAME, spec_type=Scenario1Spec, layouts=(DIRECTORY,), shape=shape,
                    plan=plan_sessions,
                    largest_requests=largest_requests, configs=config_entries)
