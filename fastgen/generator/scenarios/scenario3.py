"""Scenario 3: hundreds of developers on one monorepo; a ~90K global prefix, then a module workspace and a tool loop.

    stable  [system, guidelines, repo map, API docs, workspace, task] + turns
    noisy   [system, task, workspace, repo map, guidelines, API docs] + turns

A workspace starts with its module's shared files (20-40% of its tokens), so sessions on the same module share a
real leading part of it. Turns 1..n-1 call a tool (read_file, run_tests, ...) whose result comes back as a
`role: tool` message; the last turn answers in text. Tool results shrink where needed so that every request,
prompt plus the max_tokens inference-perf will send, fits the context window. Both layouts share every byte of
content and every timestamp; arrivals are uniform over the window, i.e. a Poisson process given the count.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import cast

from ..shared_blocks import ScenarioBlocks
from ..content.budget import compose_block, file_sections, headed_block, numbered_code, opened_block
from ..content.compose import Composer, Text
from ..content.notes import opening
from ..content.pytest_log import PytestEnv, pytest_env, pytest_log, synthetic_cases, wrong_values
from ..content.vocab import Vocab
from ..messages import Output, SessionPlan, user
from ..spec import TOOL_CALL_MIN_MAX_TOKENS, Count, Levels, Range, ScenarioSpec, Seconds, Spec, Tokens
from ..streams import session_rng
from .base import ConfigEntry, Request, Scenario, Shape
from .common import CALL_TOKENS_BOUND, Chain, gap, make_call, ticket_name

__all__ = ["SCENARIO", "Scenario3Spec", "plan_sessions"]

SCENARIO_ID = 3
NAME = "scenario3"
LAYOUTS = ("scenario3_stable", "scenario3_noisy")


@dataclass(frozen=True)
class Scenario3Spec(ScenarioSpec):
    """Monorepo swarm: a ~90K global prefix, module-shared workspaces, 2-6 tool-loop turns, Poisson arrivals."""

    not_tokens = frozenset({"modules", "turns", "shared_workspace_percent", "arrival_window_s"})
    answers = ("final_output",)

    sessions: Count = 500
    system: Tokens = 2000
    tools: Tokens = 8000
    guidelines: Tokens = 5000
    repo_map: Tokens = 55000
    api_docs: Tokens = 20000
    modules: Count = 25
    workspace: Range = Range(4000, 20000)
    # the module's shared files are this share (in percent) of a session's workspace tokens
    shared_workspace_percent: Range = Range(20, 40)
    task: Range = Range(500, 2000)
    turns: Range = Range(2, 6)
    tool_output: Range = Range(1000, 5000)
    final_output: Range = Range(300, 800)
    concurrency: Levels = (100, 250, 500)
    arrival_window_s: Seconds = 1200

    def __post_init__(self) -> None:
        super().__post_init__()
        p = self.shared_workspace_percent
        self.require(1 <= p.lo and p.hi <= 100, "shared_workspace_percent", "must lie within 1..100")
        self.require(self.turns.lo >= 1, "turns", "must be at least 1")

    def scaled(self, *, sessions: float, budgets: float) -> "Scenario3Spec":
        scaled = super().scaled(sessions=sessions, budgets=budgets)
        return dataclasses.replace(scaled, modules=max(1, min(self.modules, scaled.sessions)))  # a module a session


# tool -> the kind of text its result holds ("pytest": a run of the selected tests, built by pytest_log;
# "numbered": code with its lines numbered, as the catalog's read_file says it returns a file)
_TOOL_RESULTS = {
    "read_file": "numbered",
    "run_tests": "pytest",
    "search_code": "search",
    "run_command": "logline",
    "list_dir": "tree",
}


def _tool_arguments(v: Vocab, name: str, module: str) -> dict:
    if name == "read_file":
        return {"path": f"{module}/{v.noun()}_{v.noun()}.py"}
    if name == "run_tests":
        return {"target": f"{module}/tests/test_{v.noun()}.py", "keyword": v.func_name()}
    if name == "search_code":
        return {"query": f"def {v.verb()}_.*{v.noun()}", "path_glob": f"{module}/**/*.py"}
    if name == "run_command":
        return {"command": f"make -C {module} {v.pick(['lint', 'typecheck', 'build', 'migrate-check'])}"}
    return {"path": module, "depth": 2}


def _result_text(composer: Composer, rng, v: Vocab, call, *, header: str, size: int, env: PytestEnv) -> Text:
    """A tool's answer, `size` tokens: a pytest run of the tests the call selected, a file with its lines numbered,
    or text of the tool's kind."""
    if call.name == "read_file":
        return headed_block(composer, header, size, lambda tokens: numbered_code(composer, tokens, rng))
    if call.name != "run_tests":
        return compose_block(composer, header, _TOOL_RESULTS[call.name], size, rng)
    args = call.arguments
    return headed_block(
        composer, header, size, lambda tokens: _test_run(composer, rng, v, args, tokens=tokens, env=env)
    )


def _test_run(composer: Composer, rng, v: Vocab, args: dict, *, tokens: int, env: PytestEnv) -> Text:
    """The log of the tests a run_tests call selects (named after its -k keyword), some of them failing."""
    cases = synthetic_cases(v, args["target"], args["keyword"], v.number(2, 12))
    failed = wrong_values(v, [c for c in cases if v.random() < 0.3])
    return pytest_log(composer, rng, command="", cases=cases, failed=failed, env=env, budget=tokens)


def _fit_results(
    spec: Spec, calls: list, results: list[int], floors: list[int], *, base: int, base_messages: int, final: int
) -> list[int]:
    """Shrink tool results (never below their floors) until every turn's request fits the window: each request is
    `base` tokens in `base_messages` messages, then the calls and results before it; the last answers `final`
    tokens."""
    results = list(results)
    n = len(calls) + 1
    for t in range(1, n + 1):  # turn t sees the calls and results of turns 1..t-1
        while True:
            prompt = base + sum(c.tokens + r for c, r in zip(calls[: t - 1], results[: t - 1]))
            max_tokens = max(4 * calls[t - 1].tokens, TOOL_CALL_MIN_MAX_TOKENS) if t < n else final
            excess = spec.tokens_over_window(prompt, max_tokens, base_messages + 2 * (t - 1))
            if excess <= 0:
                break
            k = max(range(t - 1), key=lambda i: results[i] - floors[i], default=None)
            if k is None or results[k] <= floors[k]:
                raise spec.window_too_small(f"scenario 3 turn {t}", excess, lower="the scenario 3 budgets")
            results[k] -= min(excess, results[k] - floors[k])
    return results


def _workspace(composer: Composer, blocks: ScenarioBlocks, spec: Spec, rng):
    s = cast(Scenario3Spec, spec.scenarios[NAME])
    module = blocks.modules[int(rng.integers(len(blocks.modules)))]
    core = module.core.tokens
    lo = max(s.workspace.lo, math.ceil(core * 100 / s.shared_workspace_percent.hi))
    hi = max(lo, min(s.workspace.hi, core * 100 // s.shared_workspace_percent.lo))
    size = int(rng.integers(lo, hi + 1))
    own = file_sections(
        composer, rng, header="Your open files:\n", budget=max(size - core, 1), files=int(rng.integers(1, 4))
    )
    return module, composer.join([module.core, own])


def plan_sessions(
    composer: Composer, blocks: ScenarioBlocks, spec: Spec, *, seed: int, index: int
) -> list[SessionPlan]:
    """The stable and the noisy session of one developer: the same content and times, different message order."""
    s = cast(Scenario3Spec, spec.scenarios[NAME])
    rng = session_rng(seed, SCENARIO_ID, index)
    v = Vocab(rng)
    module, workspace = _workspace(composer, blocks, spec, rng)
    ticket = ticket_name(v)
    task = compose_block(
        composer,
        f"Task {ticket} in {module.path}: {v.verb()} the {v.adjective()} {v.noun()} handling in {v.func_name()}.\n",
        "prose",
        s.task.draw(rng),
        rng,
    )
    assert (
        blocks.guidelines is not None and blocks.api_docs is not None
    )  # scenario 3's spec has both (shared_blocks.py)
    stable = (blocks.system, blocks.guidelines, blocks.repo_map, blocks.api_docs, user(workspace), user(task))
    noisy = (stable[0], stable[5], stable[4], stable[2], stable[1], stable[3])

    n_turns = s.turns.draw(rng)
    names = list(_TOOL_RESULTS)
    calls = []
    for _ in range(n_turns - 1):
        name = names[int(rng.integers(len(names)))]
        calls.append(make_call(composer, rng, name, _tool_arguments(v, name, module.path)))
    headers = [f"$ {c.name} {c.arguments_json}\n" for c in calls]
    # A result is at least its header line (compose_block cannot make less), whatever the budgets say.
    floors = [max(s.tool_output.lo, composer.line(h).tokens) for h in headers]
    sizes = [max(s.tool_output.draw(rng), floor) for floor in floors]
    tools = " and ".join(dict.fromkeys(f"`{c.name}`" for c in calls)) or "nothing but reading"
    final = opened_block(
        composer,
        opening(v, "final", ticket=ticket, target=module.path, tools=tools),
        "prose",
        s.final_output.draw(rng),
        rng,
    )
    base = blocks.catalog.tokens + sum(m.tokens for m in stable)
    sizes = _fit_results(spec, calls, sizes, floors, base=base, base_messages=len(stable), final=final.tokens)
    env = pytest_env(v, blocks.repo)  # the session's every test run says the same Python, pytest and plugins
    results = [
        [_result_text(composer, rng, v, c, header=h, size=size, env=env)] for c, h, size in zip(calls, headers, sizes)
    ]

    outputs = [Output(calls=(c,)) for c in calls] + [Output(final)]
    start = int(rng.integers(0, s.arrival_window_s * 1000))
    gaps = [gap(spec.timing, rng, o) for o in outputs]
    sessions = []
    for layout, head in zip(LAYOUTS, (stable, noisy)):
        chain = Chain(
            timing=spec.timing, catalog=blocks.catalog, prefix=f"{layout}-{index:04d}", messages=head, start_ms=start
        )
        for output, texts, wait in zip(outputs, [*results, []], gaps):
            chain.send(output)
            chain.carry(texts, gap=wait)
        sessions.append(SessionPlan(layout, chain.prefix, index, blocks.catalog, tuple(chain.turns)))
    return sessions


def largest_requests(spec: Spec) -> list[Request]:
    s = cast(Scenario3Spec, spec.scenarios[NAME])
    # Tool results shrink to their minimum where the last turns would not fit (_fit_results): count them at that.
    head = s.tools + s.system + s.guidelines + s.repo_map + s.api_docs + s.workspace.hi + s.task.hi
    loop = CALL_TOKENS_BOUND + s.tool_output.lo  # one earlier turn's call and its (shrunk) result
    last = s.turns.hi - 1  # earlier turns the last one sees
    return [
        Request("scenario 3 last turn", head + last * loop, s.final_output.hi, 6 + 2 * last),
        # a tool-call turn: inference-perf sends max_tokens of at least 4096, more than a final answer's
        Request(
            "scenario 3 last tool-call turn", head + (last - 1) * loop, TOOL_CALL_MIN_MAX_TOKENS, 6 + 2 * (last - 1)
        ),
    ]


def _arrivals_note(level: int, sessions: int, rate: float, spec: Spec) -> str:
    """Scenario 3's names count arrivals, not sessions in flight: in flight is rate x session length (Little's law)."""
    s, timing = cast(Scenario3Spec, spec.scenarios[NAME]), spec.timing
    # The replay waits out every recorded tool gap (capped by max_wait_ms): a session lasts at least this long.
    gaps_s = ((s.turns.lo + s.turns.hi) / 2 - 1) * timing.tool_exec_ms.mean / 1000
    example_s = 36

    def approx(x: float) -> str:
        return f"{x:.0f}" if x >= 10 else f"{x:.1f}"

    return (
        f"c{level}: {sessions} sessions arriving evenly over {s.arrival_window_s} s ({rate:.3g}/s); "
        f"concurrent_sessions {level} is a cap, not the load: about {rate:.3g}/s x session length are in flight, "
        f"at least {approx(rate * gaps_s)} (a session waits out ~{gaps_s:.0f} s of recorded tool gaps), "
        f"{approx(rate * example_s)} for sessions of {example_s} s"
    )


def config_entries(spec: Spec) -> list[ConfigEntry]:
    s = cast(Scenario3Spec, spec.scenarios[NAME])
    entries = []
    for level in s.concurrency:
        sessions = min(level, s.sessions)
        rate = sessions / s.arrival_window_s  # inference-perf spaces starts by 1/session_rate: over the window
        for layout in LAYOUTS:
            variant = layout.rsplit("_", 1)[1]
            entries.append(
                ConfigEntry(
                    f"{NAME}/c{level}_{variant}.yml",
                    layout,
                    level,
                    sessions,
                    s.turns.hi,
                    session_rate=rate,
                    about=_arrivals_note(level, sessions, rate, spec),
                )
            )
    return entries


def shape(sc: Scenario3Spec) -> Shape:
    return Shape(sc.turns.lo, sc.turns.hi, "chain")


SCENARIO = Scenario(
    id=SCENARIO_ID,
    name=NAME,
    spec_type=Scenario3Spec,
    layouts=LAYOUTS,
    shape=shape,
    plan=plan_sessions,
    largest_requests=largest_requests,
    configs=config_entries,
)
