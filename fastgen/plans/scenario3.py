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

import math

from ..blocks import ScenarioBlocks, compose_block
from ..content.compose import Composer
from ..content.vocab import Vocab
from ..errors import SpecError
from ..spec import TOOL_CALL_MIN_MAX_TOKENS, Spec
from .common import duration_ms, file_sections, make_call, session_rng
from .types import Message, Output, SessionPlan, Turn, tool_result, user

__all__ = ["SCENARIO_ID", "LAYOUTS", "plan_sessions"]

SCENARIO_ID = 3
LAYOUTS = ("scenario3_stable", "scenario3_noisy")
# tool -> the kind of text its result holds
_TOOL_RESULTS = {"read_file": "code", "run_tests": "pytest", "search_code": "search", "run_command": "logline",
                 "list_dir": "tree"}


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


def _fit_results(spec: Spec, base: int, base_messages: int, calls: list, results: list[int], final: int) -> list[int]:
    """Shrink tool results (never below their minimum) until every turn's request fits the window."""
    lo = spec.scenario3.tool_output.lo
    results = list(results)
    n = len(calls) + 1
    for t in range(1, n + 1):  # turn t sees the calls and results of turns 1..t-1
        while True:
            prompt = base + sum(c.tokens + r for c, r in zip(calls[: t - 1], results[: t - 1]))
            max_tokens = max(4 * calls[t - 1].tokens, TOOL_CALL_MIN_MAX_TOKENS) if t < n else final
            excess = spec.tokens_over_window(prompt, max_tokens, base_messages + 2 * (t - 1))
            if excess <= 0:
                break
            k = max(range(t - 1), key=lambda i: results[i], default=None)
            if k is None or results[k] <= lo:
                raise SpecError(f"scenario 3 turn {t} needs {excess} tokens more than --max-model-len "
                                f"{spec.max_model_len}; raise --max-model-len or lower the scenario 3 budgets")
            results[k] -= min(excess, results[k] - lo)
    return results


def _workspace(composer: Composer, blocks: ScenarioBlocks, spec: Spec, rng):
    s = spec.scenario3
    module = blocks.modules[int(rng.integers(len(blocks.modules)))]
    core = module.core.tokens
    lo = max(s.workspace.lo, math.ceil(core * 100 / s.shared_workspace_percent.hi))
    hi = max(lo, min(s.workspace.hi, core * 100 // s.shared_workspace_percent.lo))
    size = int(rng.integers(lo, hi + 1))
    own = file_sections(composer, rng, header="Your open files:\n", budget=max(size - core, 1),
                        files=int(rng.integers(1, 4)))
    return module, composer.join([module.core, own])


def plan_sessions(composer: Composer, blocks: ScenarioBlocks, spec: Spec, *, seed: int,
                  index: int) -> list[SessionPlan]:
    """The stable and the noisy session of one developer: the same content and times, different message order."""
    s = spec.scenario3
    rng = session_rng(seed, SCENARIO_ID, index)
    v = Vocab(rng)
    module, workspace = _workspace(composer, blocks, spec, rng)
    ticket = f"{v.team().upper()}-{v.number(1000, 99999)}"
    task = compose_block(composer, f"Task {ticket} in {module.path}: {v.verb()} the {v.adjective()} {v.noun()} "
                                   f"handling in {v.func_name()}.\n", "prose", s.task.draw(rng), rng)
    stable = (blocks.system, blocks.guidelines, blocks.repo_map, blocks.api_docs, user(workspace), user(task))
    noisy = (stable[0], stable[5], stable[4], stable[2], stable[1], stable[3])

    n_turns = s.turns.draw(rng)
    names = list(_TOOL_RESULTS)
    calls = []
    for _ in range(n_turns - 1):
        name = names[int(rng.integers(len(names)))]
        calls.append(make_call(composer, rng, name, _tool_arguments(v, name, module.path)))
    sizes = [s.tool_output.draw(rng) for _ in calls]
    final = composer.fill("prose", s.final_output.draw(rng), rng)
    base = blocks.catalog.tokens + sum(m.tokens for m in stable)
    sizes = _fit_results(spec, base, len(stable), calls, sizes, final.tokens)
    results = [tool_result(c, compose_block(composer, f"$ {c.name} {c.arguments_json}\n", _TOOL_RESULTS[c.name],
                                            size, rng)) for c, size in zip(calls, sizes)]

    outputs = [Output(calls=(c,)) for c in calls] + [Output(final)]
    start = int(rng.integers(0, s.arrival_window_s * 1000))
    gaps = [(spec.timing.tool_exec_ms if o.is_tool_call else spec.timing.think_gap_ms).draw(rng) for o in outputs]
    return [_chain(spec, blocks, f"{layout}-{index:04d}", layout, index, head, outputs, results, start, gaps)
            for layout, head in zip(LAYOUTS, (stable, noisy))]


def _chain(spec: Spec, blocks: ScenarioBlocks, session_id: str, layout: str, index: int, head, outputs, results,
           start: int, gaps: list[int]) -> SessionPlan:
    messages: tuple[Message, ...] = head
    turns = []
    t = start
    for number, (output, gap) in enumerate(zip(outputs, gaps), start=1):
        if number > 1:
            messages = messages + (outputs[number - 2].as_history(), results[number - 2])
        end = t + duration_ms(spec.timing, blocks.catalog.tokens + sum(m.tokens for m in messages), output.tokens)
        turns.append(Turn(f"{session_id}-t{number}", number, messages, output, t, end))
        t = end + gap
    return SessionPlan(layout, session_id, index, blocks.catalog, tuple(turns))
