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

from ..blocks import ScenarioBlocks, compose_block
from ..content.compose import Composer, Text
from ..content.vocab import Vocab
from ..spec import Spec
from .common import duration_ms, file_sections, make_call, session_rng
from .types import Message, Output, SessionPlan, Turn, tool_result, user

__all__ = ["SCENARIO_ID", "DIRECTORY", "plan_session"]

SCENARIO_ID = 1
DIRECTORY = "scenario1"


def _patch_call(composer: Composer, rng, path: str, budget: int):
    head = composer.line(f"--- a/{path}\n")
    head2 = composer.line(f"+++ b/{path}\n")
    diff = composer.join([head, head2, composer.fill("diff", max(budget - head.tokens - head2.tokens, 1), rng)])
    return make_call(composer, rng, "apply_patch", {"path": path, "patch": diff.text})


def _patch_applied(composer: Composer, rng, path: str, budget: int) -> Text:
    v = Vocab(rng)
    return compose_block(composer, f"Patch applied to {path}: {v.number(1, 4)} hunk(s), "
                                   f"+{v.number(2, 40)} -{v.number(1, 30)} lines.\n", "logline", budget, rng)


def plan_session(composer: Composer, blocks: ScenarioBlocks, spec: Spec, *, seed: int, index: int) -> SessionPlan:
    s = spec.scenario1
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
    return SessionPlan(DIRECTORY, f"{DIRECTORY}-{index:04d}", index, blocks.catalog, tuple(turns))
