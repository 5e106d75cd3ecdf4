"""A workload of the agent shape (the agent_loop scenario of `--workload agent`) fitted to traffic read from traces
(traffic/read.py): the same prompt sizes, growth per step, answer lengths, steps, parallel calls, gaps, sub-agents and
shared prefix, as far as the agent workload can say them; what it cannot is one line each (`Fit.unexpressed`).

Only the requests' counts, times, answer shapes and prefix-sharing structure go in: traffic/read.py keeps no text, so none
can leave. How each field is fitted:
- the shared prefix (system + tools + repo_map, which every session of the agent workload sends first): the median
  over sessions of the first request's tokens another session sent first, split 1:4:10 as `--workload agent` does;
  the task: the first request's remaining tokens;
- tasks: a session's text answers of the main agent (not compactions) and its last answer each end a task; tasks
  where the sessions have more than one, with next_task the tokens each later task's message adds and even_waits on
  (the waits before later tasks at evenly spread quantiles of think_gap_ms, so that their median and p90 hold);
- turns: the main agent's tool-call answers a task (a compaction is a prompt that drops to under half the one
  before it, or that drops at all after a text answer: a harness that keeps the session's opening drops less);
  compact_trigger just under the smallest compacted prompt, or, with no compaction, a quarter above the largest
  prompt (so that none is made);
- turn_strata, where steps per session have a long tail (the 90th percentile further above the median than the
  10th below it, or the 99th well above the 90th): four strata of 50, 40, 8 and 2 % of the sessions whose steps
  run between the traces' percentiles at those edges, in turns a task; cut where a session would pass the 256
  requests inference-perf can queue (one `unexpressed` line says so);
- subagent_percent: the share of sessions that spawn (where not all do; 0 where none does);
- tool_result: a step's growth (the next prompt, less this one and its answer) over its calls;
- parallel_calls, subagents, subagent_turns, spawn_at: integer ranges of the same mean;
- final_output, summary, report: text answers' output tokens;
- timing: prefill and decode by least squares on the requests' durations; tool_exec_ms a log-normal whose slowest of
  k draws (the agent workload's tool gap, k the calls of the answer) has the measured median and p90 of the tool
  gaps; think_gap_ms the human waits' own (before a later task and after a compaction).

A range {lo, hi} is uniform: it is fitted to the 10th and 90th percentiles of what it stands for (a uniform's are
lo + 0.1 (hi - lo) and lo + 0.9 (hi - lo)), so one odd value does not widen it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist
from typing import Mapping, Optional, Sequence

import numpy as np

from ..errors import WorkloadError
from ..generator.scenarios.base import MOST_REQUESTS, MOST_REQUESTS_WHY
from ..generator.spec import DEFAULT_MAX_MODEL_LEN, WORKLOAD_FORMAT
from ..generator.workload import spec_from_document
from ..traffic.read import Request

__all__ = ["Fit", "fit_workload", "refined"]

SCENARIO = "agent_loop"
# how --workload agent splits the prefix every session shares: system, tools, repo_map
_PREFIX_SPLIT = (2000, 8000, 20000)
# a prompt that drops below this share of the one before it in the same agent was compacted
_COMPACTED_BELOW = 0.5
# where a compacted prompt lies above compact_trigger: the instruction to summarize (agent_loop's _INSTRUCTIONS_BOUND)
_INSTRUCTION = 40
# --workload agent's timing and answer sizes, kept where the traces do not say
_DEFAULT_TIMING = {
    "prefill_ms_per_1k_tokens": 40,
    "decode_ms_per_token": 25,
    "think_gap_ms": {"median": 3000, "p90": 12000, "cap": 60000},
    "tool_exec_ms": {"median": 800, "p90": 6000, "cap": 120000},
}
_MAX_MS = 86_400_000
# the shares of turn_strata's strata, in percent: edges at the median and p90 of steps per session, then a tail
_STRATA = (50, 40, 8, 2)
Stats = Mapping[str, Optional[float]]  # stats.traffic_stats's


@dataclass(frozen=True)
class Fit:
    document: dict  # the workload document (what a workload file holds: Spec.to_dict's form)
    unexpressed: tuple[str, ...]  # one line per statistic of the traffic the agent workload cannot express


@dataclass
class _Session:
    main: list[int]  # indices of the main agent's requests, in start order
    children: list[list[int]]  # each sub-agent's requests, in start order


def fit_workload(requests: Sequence[Request], *, max_model_len: int = DEFAULT_MAX_MODEL_LEN) -> Fit:
    """The agent workload fitted to the requests (read_traffic's, in start order)."""
    sessions = _sessions(requests)
    notes: list[str] = []
    mooncake = all(r.tool_calls is None for r in requests)
    compacted = _compacted(requests, sessions)
    shared = _shared_prefix(requests, sessions)
    system, tools, repo_map = _split(shared)
    firsts = [requests[s.main[0]].input_tokens - shared for s in sessions.values() if s.main]
    tasks = [_tasks(requests, s, compacted) for s in sessions.values()]
    per_task = [t for session in tasks for t in session]
    calls = [r.tool_calls for r in requests if r.tool_calls]
    spawning = [s for s in sessions.values() if s.children]
    tasks_range = _int_range([len(session) for session in tasks], least=1)
    scenario: dict = {
        "sessions": len(sessions),
        "system": system,
        "tools": tools,
        "repo_map": repo_map,
        "task": _range(firsts, least=1),
        "turns": _int_range(per_task, least=1),
        "parallel_calls": _int_range(calls, least=1) if calls else {"lo": 1, "hi": 1},
        "tool_result": _range(_growth_per_call(requests, sessions, compacted), least=1),
    }
    if tasks_range["hi"] > 1:
        scenario["tasks"] = tasks_range
        scenario["next_task"] = _range(_next_task_growth(requests, sessions, compacted), least=1)
    steps = [len(s.main) for s in sessions.values()]
    if _long_tailed(steps):
        scenario["turn_strata"] = _strata(steps, (tasks_range["lo"] + tasks_range["hi"]) / 2)
    scenario.update(_compaction(requests, sessions, compacted, system))
    scenario["final_output"] = _range(
        [requests[i].output_tokens for s in sessions.values() for i in _finals(requests, s, compacted)], least=1
    )
    if spawning and not mooncake:
        fewest = min(st["turns"]["lo"] for st in scenario.get("turn_strata", [{"turns": scenario["turns"]}]))
        scenario.update(_subagent_fields(requests, spawning, compacted, tools, fewest))
    share = len(spawning) / len(sessions) if spawning and not mooncake else 0.0  # none fitted: 0, not the default 100
    scenario["subagent_percent"] = 100 if share == 1 else min(99, max(int(share > 0), round(100 * share)))
    if "tasks" in scenario:
        # the waits before later tasks at evenly spread quantiles: their median and p90 hold over a few sessions
        scenario["even_waits"] = True
    scenario["concurrency"] = [_peak_sessions(requests, sessions)]
    scenario["session_spacing_ms"] = _spacing(requests, sessions)
    timing = _timing(requests, sessions, notes, mooncake)
    document = {
        "format": WORKLOAD_FORMAT,
        "max_model_len": max_model_len,
        "timing": timing,
        "scenarios": {SCENARIO: scenario},
    }
    document, cut = _within_the_request_limit(document)
    notes += _structural_notes(requests, sessions, compacted, mooncake, scenario, cut)
    return Fit(document, tuple(notes))


def _sessions(requests: Sequence[Request]) -> dict[str, _Session]:
    """Each session's main requests and its sub-agents' threads (a sub-agent request that continues no earlier one
    starts a thread)."""
    out: dict[str, _Session] = {}
    thread_of: dict[int, int] = {}
    for i, r in enumerate(requests):
        s = out.setdefault(r.session, _Session([], []))
        if not r.subagent:
            s.main.append(i)
            continue
        parent = thread_of.get(r.follows) if r.follows is not None else None
        if parent is None:
            s.children.append([])
            parent = len(s.children) - 1
        thread_of[i] = parent
        s.children[parent].append(i)
    return out


def _compacted(requests: Sequence[Request], sessions: dict[str, _Session]) -> set[int]:
    """The main requests whose prompt was compacted: the main agent's next prompt is less than half of theirs, or,
    after a text answer, smaller at all (a harness that keeps the session's opening before the summary drops less;
    a later task's prompt only grows)."""
    out = set()
    for s in sessions.values():
        for a, b in zip(s.main, s.main[1:]):
            before, after = requests[a].input_tokens, requests[b].input_tokens
            if after < _COMPACTED_BELOW * before or (requests[a].tool_calls == 0 and after < before):
                out.add(a)
    return out


def _shared_prefix(requests: Sequence[Request], sessions: dict[str, _Session]) -> int:
    """Tokens of the prefix sessions share: the median over sessions (but the first, which nobody sent it before)
    of the first request's tokens another session sent first."""
    shared = [requests[s.main[0]].shared for s in sessions.values() if s.main][1:]
    return int(round(float(np.median(shared)))) if shared else 0


def _split(shared: int) -> tuple[int, int, int]:
    total = sum(_PREFIX_SPLIT)
    system, tools = (int(round(shared * part / total)) for part in _PREFIX_SPLIT[:2])
    return system, tools, max(0, shared - system - tools)


def _growth_per_call(requests: Sequence[Request], sessions: dict[str, _Session], compacted: set[int]) -> list[float]:
    """Per step of the main agent and the sub-agents (not a spawn's, not a compaction's): tokens its results added to
    the next prompt, over its calls (1 where the traces do not say)."""
    out = []
    spawns = {_spawn(requests, s) for s in sessions.values()}
    threads = [s.main for s in sessions.values()] + [c for s in sessions.values() for c in s.children]
    for thread in threads:
        for a, b in zip(thread, thread[1:]):
            ra, rb = requests[a], requests[b]
            if a in compacted or a in spawns or ra.tool_calls == 0:
                continue
            grown = rb.input_tokens - ra.input_tokens - ra.output_tokens
            out.append(max(1.0, grown / (ra.tool_calls or 1)))
    return out


def _spawn(requests: Sequence[Request], s: _Session) -> Optional[int]:
    """The main request whose answer started the sub-agents: the last one to start before the first child."""
    if not s.children:
        return None
    first = min(requests[c[0]].start_ms for c in s.children)
    before = [i for i in s.main if requests[i].start_ms <= first]
    return before[-1] if before else None


def _finals(requests: Sequence[Request], s: _Session, compacted: set[int]) -> list[int]:
    """The main requests that end a task: a text answer (not a compaction) the human reads, and the last."""
    return [
        i for k, i in enumerate(s.main) if i not in compacted and (k == len(s.main) - 1 or requests[i].tool_calls == 0)
    ]


def _tasks(requests: Sequence[Request], s: _Session, compacted: set[int]) -> list[int]:
    """The turns (tool-call answers, a spawn among them) of each task of the session, in order."""
    finals, out, turns = set(_finals(requests, s, compacted)), [], 0
    for i in s.main:
        if i in compacted:
            continue
        if i in finals:
            out.append(turns)
            turns = 0
        else:
            turns += 1
    return out or [0]


def _next_task_growth(requests: Sequence[Request], sessions: dict[str, _Session], compacted: set[int]) -> list[float]:
    """Tokens each later task's message added: the prompt after a task's answer, less that answer's prompt and
    output."""
    out = []
    for s in sessions.values():
        for a in _finals(requests, s, compacted)[:-1]:
            b = s.main[s.main.index(a) + 1]
            out.append(max(1.0, requests[b].input_tokens - requests[a].input_tokens - requests[a].output_tokens))
    return out


def _long_tailed(values: Sequence[float]) -> bool:
    """Whether a uniform would miss the values' upper percentiles: the 90th lies further above the median than the
    10th below it, or the 99th far above the 90th."""
    if len(values) < 2:
        return False
    p10, p50, p90, p99 = (float(np.percentile(values, p, method="hazen")) for p in (10, 50, 90, 99))
    return p90 - p50 > 1.5 * (p50 - p10) + 1 or p99 > 1.5 * p90 + 1


def _strata(steps: Sequence[float], tasks: float) -> list[dict]:
    """turn_strata whose steps per session have the traces' percentiles at the strata's edges (0, 50, 90, 98 and
    100 percent): a uniform each between two of them, in turns a task (a session of `tasks` tasks, each its turns
    and a final answer). Fitted to the sessions' steps, not to their turns a task: long sessions compact more, and
    the steps are what is measured."""
    edges = np.cumsum((0,) + _STRATA)
    at = [float(np.percentile(steps, float(p), method="hazen")) / tasks - 1 for p in edges]
    out = []
    for percent, lo_q, hi_q in zip(_STRATA, at, at[1:]):
        lo = max(1, int(round(lo_q)))
        out.append({"percent": percent, "turns": {"lo": lo, "hi": max(lo, int(round(hi_q)))}})
    return out


def _within_the_request_limit(document: dict) -> tuple[dict, Optional[int]]:
    """The document with the turns a task cut to the most that keep a session within MOST_REQUESTS requests (the
    agent workload refuses more), and that most; the document as it is, and None, where it holds them already or
    something else is wrong with it (checked_spec says what)."""
    if _valid(document):
        return document, None
    scenario = document["scenarios"][SCENARIO]
    strata = scenario.get("turn_strata") or [{"turns": scenario["turns"]}]
    most = max(st["turns"]["hi"] for st in strata)
    if most <= 1 or not _valid(_cut(document, 1)):
        return document, None
    lo, hi = 1, most - 1  # the largest cut that is valid lies in [lo, hi]
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if _valid(_cut(document, mid)) else (lo, mid - 1)
    return _cut(document, lo), lo


def _valid(document: dict) -> bool:
    try:
        spec_from_document(document, source="the fitted workload")
    except WorkloadError:
        return False
    return True


def _cut(document: dict, most: int) -> dict:
    """The document with every range of turns a task, and spawn_at within the fewest, at most `most`."""
    scenario = dict(document["scenarios"][SCENARIO])

    def capped(turns: dict) -> dict:
        hi = min(turns["hi"], most)
        return {"lo": min(turns["lo"], hi), "hi": hi}

    scenario["turns"] = capped(scenario["turns"])
    if "turn_strata" in scenario:
        scenario["turn_strata"] = [{**st, "turns": capped(st["turns"])} for st in scenario["turn_strata"]]
    if "spawn_at" in scenario:
        fewest = min(st["turns"]["lo"] for st in scenario.get("turn_strata", [{"turns": scenario["turns"]}]))
        scenario["spawn_at"] = capped({**scenario["spawn_at"], "hi": min(scenario["spawn_at"]["hi"], fewest)})
    return {**document, "scenarios": {SCENARIO: scenario}}


def _compaction(requests: Sequence[Request], sessions: dict[str, _Session], compacted: set[int], system: int) -> dict:
    mains = [i for s in sessions.values() for i in s.main]
    if compacted:
        # between the largest prompt sent whole and the smallest compacted one (less the instruction)
        smallest = min(requests[i].input_tokens for i in compacted) - _INSTRUCTION
        largest_kept = max((requests[i].input_tokens for i in mains if i not in compacted), default=0)
        trigger = max(largest_kept + 1, (smallest + largest_kept) // 2)
        summary = _range([requests[i].output_tokens for i in compacted], least=1)
    else:
        trigger = int(1.25 * max(requests[i].input_tokens for i in mains)) + 1
        summary = {"lo": 1500, "hi": 3000}
    # the new prompt after a compaction (system + summary + instructions) must stay below the trigger
    room = trigger - system - 2 * _INSTRUCTION - 1
    summary["hi"] = max(1, min(summary["hi"], room))
    summary["lo"] = min(summary["lo"], summary["hi"])
    return {"compact_trigger": trigger, "summary": summary}


def _subagent_fields(
    requests: Sequence[Request], spawning: list[_Session], compacted: set[int], tools: int, turns_lo: int
) -> dict:
    children = [c for s in spawning for c in s.children]
    opening = [requests[c[0]].reused for c in children]
    child_shared = int(round(float(np.median(opening))))
    spawn_at = []
    for s in spawning:
        spawn = _spawn(requests, s)
        if spawn is not None:
            steps = [i for i in s.main if i not in compacted]
            spawn_at.append(steps.index(spawn) + 1 if spawn in steps else 1)
    at = _int_range(spawn_at or [1], least=1)
    at["hi"] = min(at["hi"], turns_lo)
    at["lo"] = min(at["lo"], at["hi"])
    return {
        "subagents": _int_range([len(s.children) for s in spawning], least=1),
        "spawn_at": at,
        "subagent_system": max(1, child_shared - tools),
        "subagent_task": _range([requests[c[0]].input_tokens - child_shared for c in children], least=1),
        "subagent_turns": _int_range([len(c) - 1 for c in children], least=1),
        "report": _range([requests[c[-1]].output_tokens for c in children], least=1),
    }


def _peak_sessions(requests: Sequence[Request], sessions: dict[str, _Session]) -> int:
    """The most sessions in flight at once (from a session's first start to its last end): the load level."""
    events = []
    for s in sessions.values():
        members = s.main + [i for c in s.children for i in c]
        start = min(requests[i].start_ms for i in members)
        end = max(requests[i].end_ms or requests[i].start_ms for i in members)
        events += [(start, 1), (end, -1)]
    peak = now = 0
    for _, step in sorted(events, key=lambda e: (e[0], e[1])):
        now += step
        peak = max(peak, now)
    return max(1, peak)


def _spacing(requests: Sequence[Request], sessions: dict[str, _Session]) -> int:
    starts = sorted(requests[s.main[0]].start_ms for s in sessions.values() if s.main)
    gaps = np.diff(starts)
    return int(min(_MAX_MS, round(float(np.median(gaps))))) if len(gaps) else 30_000


# the prompt-side token budgets: what a span's input_tokens add up from (first and message: the chat workload's)
_PROMPT_FIELDS = ("system", "tools", "repo_map", "task", "next_task", "tool_result", "compact_trigger",
                  "subagent_system", "subagent_task", "first", "message")  # fmt: skip


def refined(document: dict, target: Stats, measured: Stats) -> dict:
    """The document with what generating it missed taken back once (measured: its statistics at a small scale):
    every prompt-side budget scaled by the input tokens per step it missed. The traces' counts hold the framing
    of each message and call (roles, ids, arguments) that a budget does not, so budgets read off them run a little
    large. Timing is left as fitted: its percentiles over a few hundred gaps are as noisy as the traces' own."""
    want, got = target.get("input_mean"), measured.get("input_mean")
    if not want or not got:
        return document
    factor = want / got
    ((name, scenario),) = ((n, dict(sc)) for n, sc in document["scenarios"].items())  # agent_loop's, or chat's
    for field in _PROMPT_FIELDS:
        value = scenario.get(field)
        if isinstance(value, dict):
            lo = max(1, int(round(value["lo"] * factor)))
            scenario[field] = {"lo": lo, "hi": max(lo, int(round(value["hi"] * factor)))}
        elif isinstance(value, int):
            scenario[field] = max(1, int(round(value * factor)))
    if "summary" in scenario:  # the agent loop's: the new prompt after a compaction stays below the trigger
        room = scenario["compact_trigger"] - scenario["system"] - 2 * _INSTRUCTION - 1
        hi = max(1, min(scenario["summary"]["hi"], room))
        scenario["summary"] = {"lo": min(scenario["summary"]["lo"], hi), "hi": hi}
    return {**document, "scenarios": {name: scenario}}


# --- timing ----------------------------------------------------------------------------------------------------------


def _timing(requests: Sequence[Request], sessions: dict[str, _Session], notes: list[str], mooncake: bool) -> dict:
    timing: dict = {k: (dict(v) if isinstance(v, dict) else v) for k, v in _DEFAULT_TIMING.items()}
    timed = [r for r in requests if r.end_ms is not None]
    if len(timed) >= 2:
        timing["prefill_ms_per_1k_tokens"], timing["decode_ms_per_token"] = _service(timed)
    tool_gaps, human_gaps, ks = _gaps(requests, sessions)
    if tool_gaps:
        timing["tool_exec_ms"] = _slowest_of(tool_gaps, ks)
    if human_gaps:
        timing["think_gap_ms"] = _log_normal(human_gaps)
    if mooncake:
        notes.append(
            "tool latency, human wait: Mooncake lines have no end times; timing keeps --workload agent's "
            "prefill, decode, tool_exec_ms and think_gap_ms"
        )
    return timing


def _service(timed: Sequence[Request]) -> tuple[int, int]:
    """(prefill ms per 1K input tokens, decode ms per output token) by least squares on the durations, neither
    below 0."""
    a = np.array([[r.input_tokens / 1000, r.output_tokens] for r in timed], dtype=float)
    y = np.array([(r.end_ms or r.start_ms) - r.start_ms for r in timed], dtype=float)
    (prefill, decode), *_ = np.linalg.lstsq(a, y, rcond=None)
    return int(min(_MAX_MS, max(0, round(prefill)))), int(min(_MAX_MS, max(0, round(decode))))


def _gaps(requests: Sequence[Request], sessions: dict[str, _Session]) -> tuple[list[float], list[float], list[int]]:
    """The gaps between one request of an agent and the next, where the next continues it: after a tool-call answer
    (with its number of calls), after a text answer. traffic/stats.py also counts a request that continues an earlier one
    across others (the join after a spawn continues the answer before it, and waits for the sub-agents too): no
    tool's latency, so not fitted to."""
    tool, human, ks = [], [], []
    threads = [s.main for s in sessions.values()] + [c for s in sessions.values() for c in s.children]
    for thread in threads:
        for a, b in zip(thread, thread[1:]):
            before, r = requests[a], requests[b]
            if r.follows != a or before.end_ms is None or before.tool_calls is None:
                continue
            gap = max(0.0, r.start_ms - before.end_ms)
            if before.tool_calls:
                tool.append(gap)
                ks.append(before.tool_calls)
            else:
                human.append(gap)
    return tool, human, ks


def _log_normal(gaps: Sequence[float]) -> dict:
    p50, p90 = (float(np.percentile(gaps, p, method="hazen")) for p in (50, 90))
    return _duration(p50, p90, max(gaps))


def _duration(median: float, p90: float, cap: float) -> dict:
    m = int(min(_MAX_MS, max(1, round(median))))
    p = int(min(_MAX_MS, max(m, round(p90))))
    return {"median": m, "p90": p, "cap": int(min(_MAX_MS, max(p, math.ceil(cap))))}


_NORMAL = NormalDist()


def _slowest_of(gaps: Sequence[float], ks: Sequence[int]) -> dict:
    """The log-normal of one tool whose slowest of k draws (k as often as the answers have k calls) has the gaps'
    median and p90: P(slowest <= x) = mean over answers of Phi((ln x - mu) / sigma)^k."""
    p50, p90 = (max(1.0, float(np.percentile(gaps, p, method="hazen"))) for p in (50, 90))
    counts = np.bincount(np.asarray(ks, dtype=int))
    weights = {k: n / len(ks) for k, n in enumerate(counts) if n}

    def cdf(x: float, mu: float, sigma: float) -> float:
        return sum(w * _NORMAL.cdf((math.log(x) - mu) / sigma) ** k for k, w in weights.items())

    def mu_for(sigma: float) -> float:  # the mu that puts the slowest's median at p50 (cdf falls as mu rises)
        lo, hi = math.log(p50) - 20 * sigma - 1, math.log(p50) + 1
        for _ in range(60):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if cdf(p50, mid, sigma) > 0.5 else (lo, mid)
        return (lo + hi) / 2

    if p90 <= p50 * 1.0001:
        sigma = 1e-3
    else:
        lo, hi = 1e-3, 10.0  # a wider sigma with the median held puts less below p90
        for _ in range(60):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if cdf(p90, mu_for(mid), mid) > 0.9 else (lo, mid)
        sigma = (lo + hi) / 2
    mu = mu_for(sigma)
    z90 = _NORMAL.inv_cdf(0.9)
    return _duration(math.exp(mu), math.exp(mu + z90 * sigma), max(gaps))


# --- ranges ----------------------------------------------------------------------------------------------------------


def _range(values: Sequence[float], *, least: int = 0) -> dict:
    """The uniform {lo, hi} with the values' 10th and 90th percentiles."""
    if not len(values):
        return {"lo": least, "hi": least}
    p10, p90 = (float(np.percentile(values, p, method="hazen")) for p in (10, 90))
    width = (p90 - p10) / 0.8
    lo = max(least, int(round(p10 - 0.1 * width)))
    return {"lo": lo, "hi": max(lo, int(round(p10 + 0.9 * width)))}


def _int_range(values: Sequence[float], *, least: int = 0) -> dict:
    """An integer uniform {lo, hi} of the values' mean (a count: calls, turns, children), spread as their 10th and
    90th percentiles are."""
    spread = _range(values, least=least)
    mean = float(np.mean(values))
    half = max(0, int(round((spread["hi"] - spread["lo"]) / 2)))
    lo = max(least, int(round(mean - half)))
    return {"lo": lo, "hi": max(lo, int(round(2 * mean - lo)))}


# --- what the agent workload cannot say ------------------------------------------------------------------------------


def _structural_notes(
    requests: Sequence[Request],
    sessions: dict[str, _Session],
    compacted: set[int],
    mooncake: bool,
    scenario: dict,
    cut: Optional[int],
) -> list[str]:
    notes = [
        "output tokens per step: a tool-call answer is as long as its calls (no workload field); only text answers "
        "(final_output, summary, report) are fitted"
    ]
    if mooncake:
        notes.append(
            "tool calls per step, sub-agents, tasks: Mooncake lines carry no answers and no agent; one call a step, no "
            "sub-agents, one task, and a session's every request a step of its loop (tool_result is a step's whole "
            "growth)"
        )
        notes.append(
            "appended tokens, cached share, cross-session sharing: Mooncake lines share whole hash-id blocks, the "
            "fitted spans prefixes of messages, so these differ by up to a block a request"
        )
    later = sum(len(_finals(requests, s, compacted)) - 1 for s in sessions.values())
    if later and "tasks" not in scenario and not mooncake:
        notes.append(
            f"human wait: {later} waits before a later task, too few sessions with one to fit tasks (one task a "
            "session); think_gap_ms (fitted) only follows a compaction"
        )
    if cut is not None:
        longest = max(len(s.main) for s in sessions.values())
        notes.append(
            f"steps per session, tail: the traces' longest session has {longest} steps; {MOST_REQUESTS_WHY}, so "
            f"fastgen makes at most {MOST_REQUESTS} a session and the fitted turns stop at {cut} a task"
        )
    return notes
