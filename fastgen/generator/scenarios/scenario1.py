"""Scenario 1: a 6-turn debug-fix-verify agent loop; turns 3 and 5 answer with an apply_patch tool call.

    T1 [system, repo map, file context, bug report]      -> analysis
    T2 + analysis + "inspect the tests"                  -> inspection plan
    T3 + plan + test logs                                -> apply_patch(...)
    T4 + apply_patch call + tool result (patch applied)  -> explanation
    T5 + explanation + failing tests                     -> apply_patch(...) revised
    T6 + apply_patch call + tool result (passing tests)  -> summary

Each turn's input is the previous input plus the previous output plus one new message, so inference-perf builds a
linear chain with SHARED, OUTPUT, UNIQUE segments, and the live tool call is fed forward by its id.

One story runs through the session: the file context shows the module the bug report names and that module's test
file; the logs run those tests; each patch edits the function the report names, applies to the module as the
context (then the first patch) left it, and is reported as its diff says; the answers open on these facts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

from ..shared_blocks import ScenarioBlocks
from ..content.budget import compose_block, file_frame, headed_block, opened, opened_block, split_budget
from ..content.compose import Composer, Text
from ..content.patch import Patch, make_patch, patch_summary
from ..content.notes import opening
from ..content.agent_plan import PlanFacts, numbered, plan_steps
from ..content.pytest_log import UnitTest, module_functions, pytest_env, pytest_log, module_tests, wrong_values
from ..content.vocab import Vocab
from ..messages import Message, Output, SessionPlan, user
from ..spec import TOOL_CALL_MIN_MAX_TOKENS, Count, Levels, Millis, Range, ScenarioSpec, Spec, Tokens
from ..streams import session_rng
from .base import ConfigEntry, Request, Scenario, Shape
from .common import CALL_TOKENS_BOUND, Chain, gap, make_call, ticket_name

__all__ = ["SCENARIO", "Scenario1Spec", "plan_sessions"]

SCENARIO_ID = 1
NAME = DIRECTORY = "scenario1"
EVENTS = 6  # the design's turn shape: six turns, one request each
TOOL_EVENTS = frozenset({2, 4})  # turns 3 and 5 call apply_patch
_TOKENS_PER_TEST = 45  # about what a test of module_tests() takes: only a first guess at the test file's size


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


def _patch_call(composer: Composer, rng, patch: Patch):
    return make_call(composer, rng, "apply_patch", {"path": patch.path, "patch": patch.diff})


def _patch_applied(composer: Composer, rng, patch: Patch, budget: int) -> Text:
    return compose_block(composer, patch_summary(patch), "logline", budget, rng)


@dataclass(frozen=True)
class _Context:
    """The files turn 1 shows: the module the bug is in, its tests and some neighbours."""

    text: Text
    target: str
    code: str  # the target module's text, as shown
    test_path: str
    cases: list[UnitTest]
    neighbours: list[str]  # the other modules shown


def _file_context(composer: Composer, rng, v: Vocab, budget: int) -> _Context:
    paths = list(dict.fromkeys(v.module_path() for _ in range(int(rng.integers(3, 7)))))
    target = paths[0]
    package, stem = target.removeprefix("src/").rsplit("/", 1)
    test_path = f"tests/{package}/test_{stem}"
    head = composer.line("Files relevant to the bug report:\n")
    frames = [file_frame(composer, p) for p in [*paths, test_path]]
    tests = int(rng.integers(4, 9))
    estimate = _TOKENS_PER_TEST * tests  # the test file is written after its module, from the module's functions
    body = budget - head.tokens - sum(top.tokens + end.tokens for top, end in frames) - estimate
    shares = split_budget(max(body, len(paths)), len(paths), rng)
    code = composer.fill("code", shares[0], rng)
    module = f"{package.replace('/', '.')}.{stem.removesuffix('.py')}"
    test_text, cases = module_tests(v, test_path, module, module_functions(code.text), tests)
    test_file = composer.line(test_text)
    if len(shares) > 1:  # a neighbour takes up what the estimate missed
        shares[-1] = max(shares[-1] + estimate - test_file.tokens, 1)
    bodies = [code, *(composer.fill("code", share, rng) for share in shares[1:]), test_file]
    parts = [head]
    for (top, end), file in zip(frames, bodies):
        parts += [top, file, end]
    return _Context(composer.join(parts), target, code.text, test_path, cases, paths[1:])


def _changed(*patches: Patch) -> dict:
    """What the patches changed, as an answer states it."""
    hunks = sum(p.hunks for p in patches)
    return dict(
        hunks=hunks,
        hunk_word="place" if hunks == 1 else "places",
        added=sum(p.added for p in patches),
        removed=sum(p.removed for p in patches),
    )


def _failures(v: Vocab, cases: list[UnitTest], k: int) -> dict[str, int]:
    """k failing tests and the wrong values their calls returned."""
    return wrong_values(v, dict.fromkeys(cases[v.index(len(cases))] for _ in range(k)))


def plan_sessions(
    composer: Composer, blocks: ScenarioBlocks, spec: Spec, *, seed: int, index: int
) -> list[SessionPlan]:
    s = cast(Scenario1Spec, spec.scenarios[NAME])
    rng = session_rng(seed, SCENARIO_ID, index)
    v = Vocab(rng)
    ticket = ticket_name(v)
    context = _file_context(composer, rng, v, s.file_context)
    target, cases = context.target, context.cases
    env = pytest_env(v, blocks.repo)  # one machine runs the session's tests: every log says the same versions
    functions = module_functions(context.code) or [v.func_name()]
    culprit = functions[0]
    first_failures = _failures(v, cases, 1 + v.index(3))
    still = dict(list(first_failures.items())[:1])
    first = make_patch(v, target, context.code, composer.chars_for(s.patch.draw(rng), "code"), focus=culprit)
    second = make_patch(v, target, first.after, composer.chars_for(s.patch.draw(rng), "code"), focus=culprit)
    facts = dict(
        ticket=ticket,
        culprit=culprit,
        target=target,
        test_path=context.test_path,
        tests=len(cases),
        failing=next(iter(still)),
    )

    def answer(kind: str, budget: int, **more) -> Text:
        return opened_block(composer, opening(v, kind, **facts, **more), "prose", budget, rng)

    # the plan's steps name the session's own module, functions, test file and tests (not pooled steps' random ones)
    plan_facts = PlanFacts(target, functions, context.test_path, cases, context.neighbours)

    bug = compose_block(
        composer,
        f"Bug report {ticket}: {culprit} returns a stale {v.noun()} under "
        f"concurrent {v.noun()} updates (see {target}).\n",
        "prose",
        s.bug_report.draw(rng),
        rng,
    )
    analysis = Output(answer("analysis", s.analysis.draw(rng)))
    inspect = compose_block(
        composer,
        f"Before changing {target}, inspect the tests that cover it and tell me which ones should catch {ticket}.\n",
        "prose",
        s.inspect_request.draw(rng),
        rng,
    )
    plan_budget = s.inspection_plan.draw(rng)
    plan_text = opened(
        composer, opening(v, "plan", **facts), plan_budget, lambda n: plan_steps(composer, v, rng, n, plan_facts)
    )
    plan = Output(numbered(composer, plan_text))
    logs = headed_block(
        composer,
        f"Output of `pytest {context.test_path}`:\n",
        s.test_logs.draw(rng),
        lambda budget: pytest_log(
            composer, rng, command="", cases=cases, failed=first_failures, env=env, budget=budget
        ),
    )
    patch1 = Output(calls=(_patch_call(composer, rng, first),))
    applied1 = _patch_applied(composer, rng, first, s.patch_result.draw(rng))
    explanation = Output(answer("explanation", s.explanation.draw(rng), **_changed(first)))
    failing = headed_block(
        composer,
        "I ran the full suite after your patch; these tests still fail:\n",
        s.failing_tests.draw(rng),
        lambda budget: pytest_log(
            composer,
            rng,
            command="pytest",
            cases=cases,
            failed=still,
            env=env,
            budget=budget,
            other_files=int(rng.integers(4, 12)),
        ),
    )
    patch2 = Output(calls=(_patch_call(composer, rng, second),))
    applied2 = composer.join(
        [
            _patch_applied(composer, rng, second, s.patch_result.draw(rng)),
            pytest_log(
                composer,
                rng,
                command=f"pytest -rP {context.test_path}",
                cases=cases,
                failed={},
                env=env,
                budget=s.passing_tests.draw(rng),
                report_passes=True,
            ),
        ]
    )
    summary = Output(answer("summary", s.summary.draw(rng), **_changed(first, second)))

    # (what each request adds after the previous answer, its answer, the results of its calls)
    steps: list[tuple[tuple[Message, ...], Output, list[Text]]] = [
        ((), analysis, []),
        ((user(inspect),), plan, []),
        ((user(logs),), patch1, [applied1]),
        ((), explanation, []),
        ((user(failing),), patch2, [applied2]),
        ((), summary, []),
    ]
    chain = Chain(
        timing=spec.timing,
        catalog=blocks.catalog,
        prefix=f"{DIRECTORY}-{index:04d}",
        messages=(blocks.system, blocks.repo_map, user(context.text), user(bug)),
        start_ms=index * s.session_spacing_ms,
    )
    for adds, output, results in steps:
        chain.add(*adds)
        chain.send(output)
        chain.carry(results, gap=gap(spec.timing, rng, output))
    return [SessionPlan(DIRECTORY, chain.prefix, index, blocks.catalog, tuple(chain.turns))]


def largest_requests(spec: Spec) -> list[Request]:
    s = cast(Scenario1Spec, spec.scenarios[NAME])
    call = CALL_TOKENS_BOUND
    t5 = (
        s.tools
        + s.system
        + s.repo_map
        + s.file_context
        + s.bug_report.hi
        + s.analysis.hi
        + s.inspect_request.hi
        + s.inspection_plan.hi
        + s.test_logs.hi
        + s.patch.hi
        + call
        + s.patch_result.hi
        + s.explanation.hi
        + s.failing_tests.hi
    )
    t6 = t5 + s.patch.hi + call + s.patch_result.hi + s.passing_tests.hi
    return [
        Request("scenario 1 turn 5", t5, TOOL_CALL_MIN_MAX_TOKENS, 12),
        Request("scenario 1 turn 6", t6, s.summary.hi, 14),
    ]


def config_entries(spec: Spec) -> list[ConfigEntry]:
    s = cast(Scenario1Spec, spec.scenarios[NAME])
    return [
        ConfigEntry(
            f"{NAME}/c{level}.yml",
            DIRECTORY,
            level,
            s.sessions,
            EVENTS,
            about=f"c{level}: {level} sessions in flight at a time (the next starts when one ends), "
            f"{s.sessions} in all, each a chain of {EVENTS} requests",
        )
        for level in s.concurrency
    ]


def shape(sc: Scenario1Spec) -> Shape:
    return Shape(EVENTS, EVENTS, "chain", TOOL_EVENTS)


SCENARIO = Scenario(
    id=SCENARIO_ID,
    name=NAME,
    spec_type=Scenario1Spec,
    layouts=(DIRECTORY,),
    shape=shape,
    plan=plan_sessions,
    largest_requests=largest_requests,
    configs=config_entries,
)
