"""The statistics published measurements of coding agents report, measured on any traffic (read.py), and the table
that sets them beside the published values (or another traffic's).

Published (the references of PUBLISHED): TraceLab (Claude Code and Codex, 4,265 sessions, 357K steps; uw-syfi/TraceLab,
arXiv 2606.30560), AgentX (Claude Code), and one production report of cross-session sharing. Definitions, as measured
here: a step is one request; "steps per session" counts the requests of a session's main agent (not its sub-agents');
appended tokens are a request's input tokens that no earlier request sent as the same prefix, and the cached share is
one minus their sum over the input tokens' (an unbounded prefix cache); cross-session sharing is the share of input
tokens in a prefix that another session sent first; tool latency is the time from an answer with tool calls to the
request that continues it, human wait the same after a text answer. Statistics compared between traffics (no
published value): requests per session count a session's sub-agents' too; a request's idle gap is the time from the
latest end of its session's earlier requests to its start (0 where one still runs); the hit ratio by idle gap is the
share of the prompts after such a gap that an earlier request of the same session sent as the same prefix (what an
engine's cache that kept the session's blocks across the gap would hit; a production cache keeps them minutes, not
forever, so compare the buckets); the arrival rate counts the requests started in each minute from the first
request's (the last minute counted whole). Percentiles are Hazen's ((i + 0.5) / n), so a
p99 of a few hundred sessions is an observed session, not an extrapolation.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Callable, Optional, Sequence

import numpy as np

from .read import Request

__all__ = [
    "GAPS",
    "PUBLISHED",
    "Statistic",
    "comparison",
    "comparison_table",
    "difference",
    "fidelity_table",
    "idle_gaps",
    "traffic_stats",
    "unavailable",
    "within",
]


@dataclass(frozen=True)
class Statistic:
    key: str
    what: str
    unit: str  # tokens, steps, requests, calls, s, min, %, req/min
    published: Optional[float]
    source: str
    tolerance: float  # the relative difference (or, for %, points) a calibrated workload is held within


# the idle-gap buckets of the hit ratio (key, range, upper bound in minutes): production caches keep a prefix for
# minutes, so what a session sent before is worth less the longer it idles
GAPS = (
    ("hit_under_1m", "< 1 min", 1.0),
    ("hit_1_5m", "1-5 min", 5.0),
    ("hit_5_10m", "5-10 min", 10.0),
    ("hit_over_10m", "> 10 min", float("inf")),
)

PUBLISHED = (
    Statistic("input_mean", "input tokens per step, mean", "tokens", 154_000, "TraceLab", 0.10),
    Statistic("input_p10", "input tokens per request, p10", "tokens", None, "", 0.15),
    Statistic("input_p50", "input tokens per request, median", "tokens", 142_000, "AgentX", 0.10),
    Statistic("input_p90", "input tokens per request, p90", "tokens", None, "", 0.15),
    Statistic("input_p99", "input tokens per request, p99", "tokens", None, "", 0.25),
    Statistic("appended_mean", "appended (uncached) tokens per step, mean", "tokens", 6_600, "TraceLab", 0.15),
    Statistic("cached_share", "input tokens cached (unbounded prefix cache)", "%", 96.0, "TraceLab", 1.5),
    Statistic("output_mean", "output tokens per step, mean", "tokens", 523, "TraceLab", 0.10),
    Statistic("output_p10", "output tokens per request, p10", "tokens", None, "", 0.15),
    Statistic("output_p50", "output tokens per request, median", "tokens", 444, "AgentX", 0.15),
    Statistic("output_p90", "output tokens per request, p90", "tokens", None, "", 0.15),
    Statistic("output_p99", "output tokens per request, p99", "tokens", None, "", 0.25),
    Statistic("steps_p50", "steps per session (main agent), median", "steps", 15, "TraceLab", 0.15),
    Statistic("steps_p99", "steps per session (main agent), p99", "steps", 1107, "TraceLab", 0.25),
    Statistic("requests_p10", "requests per session (sub-agents too), p10", "requests", None, "", 0.15),
    Statistic("requests_p50", "requests per session (sub-agents too), median", "requests", None, "", 0.15),
    Statistic("requests_p90", "requests per session (sub-agents too), p90", "requests", None, "", 0.15),
    Statistic("requests_p99", "requests per session (sub-agents too), p99", "requests", None, "", 0.25),
    Statistic("calls_mean", "tool calls per step, mean", "calls", 1.2, "TraceLab", 0.10),
    Statistic("tool_p50", "tool latency, median", "s", 0.3, "TraceLab", 0.25),
    Statistic("tool_p90", "tool latency, p90", "s", 13.6, "TraceLab", 0.25),
    Statistic("human_p50", "human wait between requests, median", "min", 1.4, "TraceLab", 0.25),
    Statistic("human_p90", "human wait between requests, p90", "min", 20.6, "TraceLab", 0.25),
    Statistic("idle_p50", "idle gap before a session's next request, median", "s", None, "", 0.25),
    Statistic("idle_p90", "idle gap before a session's next request, p90", "s", None, "", 0.25),
    *(Statistic(key, f"prompt the session sent before, idle gap {what}", "%", None, "", 5.0) for key, what, _ in GAPS),
    Statistic("rate_mean", "requests per minute, mean", "req/min", None, "", 0.10),
    Statistic("rate_p90", "requests per minute, p90 over minutes", "req/min", None, "", 0.15),
    Statistic("rate_peak", "requests per minute, peak", "req/min", None, "", 0.25),
    Statistic("subagent_share", "sessions that spawn sub-agents", "%", 44.0, "AgentX", 5.0),
    Statistic("cross_share", "input tokens shared across sessions", "%", 4.8, "production report", 2.0),
)


def _pct(values: Sequence[float], p: float) -> Optional[float]:
    return float(np.percentile(np.asarray(values, dtype=float), p, method="hazen")) if len(values) else None


def _mean(values: Sequence[float]) -> Optional[float]:
    return float(np.mean(values)) if len(values) else None


def traffic_stats(requests: Sequence[Request]) -> dict[str, Optional[float]]:
    """Every statistic of PUBLISHED measured on the requests (None where the traces do not say, unavailable() says
    why: tool calls and gaps of Mooncake lines), plus the counts they rest on: sessions, requests."""
    inputs = [r.input_tokens for r in requests]
    outputs = [r.output_tokens for r in requests]
    total = sum(inputs)
    steps = Counter(r.session for r in requests if not r.subagent)
    sessions = sorted({r.session for r in requests})
    spawning = {r.session for r in requests if r.subagent}
    calls = [r.tool_calls for r in requests if r.tool_calls is not None]
    tool_gaps, human_gaps = _answer_gaps(requests)
    return {
        "sessions": float(len(sessions)),
        "requests": float(len(requests)),
        "input_mean": _mean(inputs),
        **{f"input_p{p}": _pct(inputs, p) for p in (10, 50, 90, 99)},
        "appended_mean": _mean([r.input_tokens - r.reused for r in requests]),
        "cached_share": 100.0 * sum(r.reused for r in requests) / total if total else None,
        "output_mean": _mean(outputs),
        **{f"output_p{p}": _pct(outputs, p) for p in (10, 50, 90, 99)},
        "steps_p50": _pct(list(steps.values()), 50),
        "steps_p99": _pct(list(steps.values()), 99),
        **{f"requests_p{p}": _pct(list(Counter(r.session for r in requests).values()), p) for p in (10, 50, 90, 99)},
        "calls_mean": _mean(calls) if calls else None,
        "tool_p50": _scaled(_pct(tool_gaps, 50), 1000),
        "tool_p90": _scaled(_pct(tool_gaps, 90), 1000),
        "human_p50": _scaled(_pct(human_gaps, 50), 60_000),
        "human_p90": _scaled(_pct(human_gaps, 90), 60_000),
        **_idle_stats(requests),
        **_arrival_stats(requests),
        "subagent_share": 100.0 * len(spawning) / len(sessions) if sessions else None,
        "cross_share": 100.0 * sum(r.shared for r in requests) / total if total else None,
    }


def _answer_gaps(requests: Sequence[Request]) -> tuple[list[float], list[float]]:
    """The gaps (ms) from an answer to the request that continues it: after tool calls (tool latency), after text
    (human wait)."""
    tool_gaps: list[float] = []
    human_gaps: list[float] = []
    for r in requests:
        if r.follows is None:
            continue
        before = requests[r.follows]
        if before.end_ms is None or before.tool_calls is None:
            continue
        (tool_gaps if before.tool_calls else human_gaps).append(max(0.0, r.start_ms - before.end_ms))
    return tool_gaps, human_gaps


def idle_gaps(requests: Sequence[Request]) -> list[tuple[float, Request]]:
    """Each request after its session's first (in start order) with its idle gap (ms): from the end of the session's
    last earlier request to end (any of its agents') to its start, 0 where one is still running. Empty where the
    traces have no end times."""
    out: list[tuple[float, Request]] = []
    last_end: dict[str, float] = {}
    for r in sorted(requests, key=lambda r: r.start_ms):  # stable: a tie keeps the traces' order
        if r.session in last_end:
            out.append((max(0.0, r.start_ms - last_end[r.session]), r))
        if r.end_ms is None:
            return []
        last_end[r.session] = max(last_end.get(r.session, r.end_ms), r.end_ms)
    return out


def _idle_stats(requests: Sequence[Request]) -> dict[str, Optional[float]]:
    """The idle gaps' p50 and p90 (s), and by gap the share of the prompts the session had sent before (what a cache
    that keeps a session's prefixes across the gap would hit)."""
    gaps = idle_gaps(requests)
    out = {
        "idle_p50": _scaled(_pct([g for g, _ in gaps], 50), 1000),
        "idle_p90": _scaled(_pct([g for g, _ in gaps], 90), 1000),
    }
    low = 0.0
    for key, _, high in GAPS:
        bucket = [r for g, r in gaps if low * 60_000 <= g < high * 60_000]
        sent = sum(r.input_tokens for r in bucket)
        out[key] = 100.0 * sum(r.own for r in bucket) / sent if sent else None
        low = high
    return out


def _arrival_stats(requests: Sequence[Request]) -> dict[str, Optional[float]]:
    """Requests started per minute, over the minutes from the first request's (the last minute counted whole)."""
    if not requests:
        return {"rate_mean": None, "rate_p90": None, "rate_peak": None}
    starts = np.asarray([r.start_ms for r in requests], dtype=float)
    counts = np.bincount(((starts - starts.min()) // 60_000).astype(int)).tolist()
    return {"rate_mean": _mean(counts), "rate_p90": _pct(counts, 90), "rate_peak": float(max(counts))}


def unavailable(requests: Sequence[Request], stats: dict[str, Optional[float]]) -> list[str]:
    """One line for each reason some statistics are None: what the traces do not carry, or have none of."""
    no_ends = all(r.end_ms is None for r in requests)
    no_calls = all(r.tool_calls is None for r in requests)
    reasons: dict[str, list[str]] = {}
    for stat in PUBLISHED:
        if stats.get(stat.key) is not None:
            continue
        family = stat.key.split("_")[0]
        if no_ends and family in ("tool", "human", "idle", "hit"):
            reason = "the traces have no end times (a gap starts at an answer's end)"
        elif no_calls and family in ("calls", "tool", "human"):
            reason = "the traces do not say an answer's tool calls"
        else:
            reason = _NONE_MEASURED.get(family, "no requests")
        reasons.setdefault(reason, []).append(stat.what)
    return [f"- {reason}: {_listed(whats)}" for reason, whats in reasons.items()]


def _listed(whats: list[str]) -> str:
    """The statistics' names, each said after the first of a family by what tells it apart ("..., p90; p99")."""
    out = []
    for i, what in enumerate(whats):
        head = what.rpartition(", ")[0]
        out.append(what.rpartition(", ")[2] if i and head and whats[i - 1].startswith(head + ", ") else what)
    return "; ".join(out)


_NONE_MEASURED = {
    "tool": "no answer with tool calls is continued",
    "human": "no text answer is continued",
    "idle": "no session has two requests",
    "hit": "no request follows an idle gap in that range",
}


def _scaled(value: Optional[float], divisor: float) -> Optional[float]:
    return None if value is None else value / divisor


def _shown(value: Optional[float], unit: str) -> str:
    if value is None:
        return "-"
    if unit in ("s", "min", "calls"):
        return f"{value:.2f}"
    if unit in ("%", "requests", "req/min"):
        return f"{value:,.1f}"
    return f"{value:,.0f}"


def _tolerance(stat: Statistic) -> str:
    return f"±{stat.tolerance:g} pt" if stat.unit == "%" else f"±{stat.tolerance:.0%}"


def _label(stat: Statistic) -> str:
    return stat.what + ("" if stat.unit in ("tokens", "steps", "requests", "calls") else f" ({stat.unit})")


def difference(stat: Statistic, value: Optional[float], reference: Optional[float]) -> Optional[float]:
    """value minus reference, as the tolerance is held: points for a share, else relative to the reference (None:
    nothing to compare, or a reference of 0)."""
    if value is None or reference is None:
        return None
    if stat.unit == "%":
        return value - reference
    return (value - reference) / abs(reference) if reference else None


def within(stat: Statistic, value: Optional[float], reference: Optional[float]) -> Optional[bool]:
    """Whether a measured value is within the statistic's tolerance of the reference (None: nothing to compare)."""
    if value is None or reference is None:
        return None
    if stat.unit == "%":
        return abs(value - reference) <= stat.tolerance
    return abs(value - reference) <= stat.tolerance * abs(reference)


def fidelity_table(
    measured: dict[str, Optional[float]],
    reference: Optional[dict[str, Optional[float]]] = None,
    *,
    reference_name: str = "published",
    measured_name: str = "measured",
) -> str:
    """A Markdown table: each statistic, the reference (the published value, or another traffic's), the measured
    one, the tolerance and whether it holds."""
    ref: Callable[[Statistic], Optional[float]] = (
        (lambda s: s.published) if reference is None else (lambda s: reference.get(s.key))
    )
    lines = [
        f"| statistic | {reference_name} | {measured_name} | tolerance | within |",
        "|---|---:|---:|---:|:---:|",
    ]
    for stat in PUBLISHED:
        value, expected = measured.get(stat.key), ref(stat)
        source = f" ({stat.source})" if reference is None and stat.source else ""
        lines.append(
            f"| {_label(stat)} | {_shown(expected, stat.unit)}{source} | {_shown(value, stat.unit)} | "
            f"{_tolerance(stat)} | {_mark(within(stat, value, expected))} |"
        )
    lines.append(
        f"\n{measured['sessions']:,.0f} sessions, {measured['requests']:,.0f} requests"
        + ("" if reference is None else f" (reference: {reference.get('sessions', 0):,.0f} sessions)")
    )
    return "\n".join(lines)


def _mark(held: Optional[bool]) -> str:
    return "-" if held is None else ("yes" if held else "NO")


def comparison(
    traffic: dict[str, Optional[float]], against: dict[str, Optional[float]]
) -> dict[str, dict[str, object]]:
    """Each statistic of one traffic beside another's: both values, the difference (difference()), the tolerance
    and whether it holds (None: a value missing)."""
    out: dict[str, dict[str, object]] = {}
    for stat in PUBLISHED:
        a, b = traffic.get(stat.key), against.get(stat.key)
        out[stat.key] = {
            "what": stat.what,
            "unit": stat.unit,
            "traffic": a,
            "against": b,
            "difference": difference(stat, a, b),
            "tolerance": stat.tolerance,
            "within": within(stat, a, b),
        }
    return out


def comparison_table(
    traffic: dict[str, Optional[float]], against: dict[str, Optional[float]], *, traffic_name: str, against_name: str
) -> str:
    """A Markdown table of two traffics side by side: each statistic, both values, the first's difference from the
    second (relative, or points for a share), the tolerance and whether it holds."""
    lines = [
        f"| statistic | {traffic_name} | {against_name} | difference | tolerance | within |",
        "|---|---:|---:|---:|---:|:---:|",
    ]
    for stat in PUBLISHED:
        a, b = traffic.get(stat.key), against.get(stat.key)
        d = difference(stat, a, b)
        shown = "-" if d is None else (f"{d:+.1f} pt" if stat.unit == "%" else f"{d:+.0%}")
        lines.append(
            f"| {_label(stat)} | {_shown(a, stat.unit)} | {_shown(b, stat.unit)} | {shown} | {_tolerance(stat)} | "
            f"{_mark(within(stat, a, b))} |"
        )
    lines.append(
        f"\n{traffic_name}: {traffic['sessions']:,.0f} sessions, {traffic['requests']:,.0f} requests; "
        f"{against_name}: {against['sessions']:,.0f} sessions, {against['requests']:,.0f} requests"
    )
    return "\n".join(lines)
