"""The statistics published measurements of coding agents report, measured on any traffic (read.py), and the table
that sets them beside the published values (or another traffic's).

Published (the references of PUBLISHED): TraceLab (Claude Code and Codex, 4,265 sessions, 357K steps; uw-syfi/TraceLab,
arXiv 2606.30560), AgentX (Claude Code), and one production report of cross-session sharing. Definitions, as measured
here: a step is one request; "steps per session" counts the requests of a session's main agent (not its sub-agents');
appended tokens are a request's input tokens that no earlier request sent as the same prefix, and the cached share is
one minus their sum over the input tokens' (an unbounded prefix cache); cross-session sharing is the share of input
tokens in a prefix that another session sent first; tool latency is the time from an answer with tool calls to the
request that continues it, human wait the same after a text answer. Percentiles are Hazen's ((i + 0.5) / n), so a
p99 of a few hundred sessions is an observed session, not an extrapolation.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Callable, Optional, Sequence

import numpy as np

from .read import Request

__all__ = ["PUBLISHED", "Statistic", "traffic_stats", "fidelity_table"]


@dataclass(frozen=True)
class Statistic:
    key: str
    what: str
    unit: str  # tokens, steps, calls, s, min, %
    published: Optional[float]
    source: str
    tolerance: float  # the relative difference (or, for %, points) a calibrated workload is held within


PUBLISHED = (
    Statistic("input_mean", "input tokens per step, mean", "tokens", 154_000, "TraceLab", 0.10),
    Statistic("input_p50", "input tokens per request, median", "tokens", 142_000, "AgentX", 0.10),
    Statistic("appended_mean", "appended (uncached) tokens per step, mean", "tokens", 6_600, "TraceLab", 0.15),
    Statistic("cached_share", "input tokens cached (unbounded prefix cache)", "%", 96.0, "TraceLab", 1.5),
    Statistic("output_mean", "output tokens per step, mean", "tokens", 523, "TraceLab", 0.10),
    Statistic("output_p50", "output tokens per request, median", "tokens", 444, "AgentX", 0.15),
    Statistic("steps_p50", "steps per session (main agent), median", "steps", 15, "TraceLab", 0.15),
    Statistic("steps_p99", "steps per session (main agent), p99", "steps", 1107, "TraceLab", 0.25),
    Statistic("calls_mean", "tool calls per step, mean", "calls", 1.2, "TraceLab", 0.10),
    Statistic("tool_p50", "tool latency, median", "s", 0.3, "TraceLab", 0.25),
    Statistic("tool_p90", "tool latency, p90", "s", 13.6, "TraceLab", 0.25),
    Statistic("human_p50", "human wait between requests, median", "min", 1.4, "TraceLab", 0.25),
    Statistic("human_p90", "human wait between requests, p90", "min", 20.6, "TraceLab", 0.25),
    Statistic("subagent_share", "sessions that spawn sub-agents", "%", 44.0, "AgentX", 5.0),
    Statistic("cross_share", "input tokens shared across sessions", "%", 4.8, "production report", 2.0),
)


def _pct(values: Sequence[float], p: float) -> Optional[float]:
    return float(np.percentile(np.asarray(values, dtype=float), p, method="hazen")) if len(values) else None


def _mean(values: Sequence[float]) -> Optional[float]:
    return float(np.mean(values)) if len(values) else None


def traffic_stats(requests: Sequence[Request]) -> dict[str, Optional[float]]:
    """Every statistic of PUBLISHED measured on the requests (None where the traces do not say: tool calls and gaps
    of Mooncake lines), plus the counts they rest on: sessions, requests."""
    inputs = [r.input_tokens for r in requests]
    total = sum(inputs)
    steps = Counter(r.session for r in requests if not r.subagent)
    sessions = sorted({r.session for r in requests})
    spawning = {r.session for r in requests if r.subagent}
    calls = [r.tool_calls for r in requests if r.tool_calls is not None]
    tool_gaps: list[float] = []
    human_gaps: list[float] = []
    for r in requests:
        if r.follows is None:
            continue
        before = requests[r.follows]
        if before.end_ms is None or before.tool_calls is None:
            continue
        (tool_gaps if before.tool_calls else human_gaps).append(max(0.0, r.start_ms - before.end_ms))
    return {
        "sessions": float(len(sessions)),
        "requests": float(len(requests)),
        "input_mean": _mean(inputs),
        "input_p50": _pct(inputs, 50),
        "appended_mean": _mean([r.input_tokens - r.reused for r in requests]),
        "cached_share": 100.0 * sum(r.reused for r in requests) / total if total else None,
        "output_mean": _mean([r.output_tokens for r in requests]),
        "output_p50": _pct([r.output_tokens for r in requests], 50),
        "steps_p50": _pct(list(steps.values()), 50),
        "steps_p99": _pct(list(steps.values()), 99),
        "calls_mean": _mean(calls) if calls else None,
        "tool_p50": _scaled(_pct(tool_gaps, 50), 1000),
        "tool_p90": _scaled(_pct(tool_gaps, 90), 1000),
        "human_p50": _scaled(_pct(human_gaps, 50), 60_000),
        "human_p90": _scaled(_pct(human_gaps, 90), 60_000),
        "subagent_share": 100.0 * len(spawning) / len(sessions) if sessions else None,
        "cross_share": 100.0 * sum(r.shared for r in requests) / total if total else None,
    }


def _scaled(value: Optional[float], divisor: float) -> Optional[float]:
    return None if value is None else value / divisor


def _shown(value: Optional[float], unit: str) -> str:
    if value is None:
        return "-"
    if unit in ("s", "min", "calls"):
        return f"{value:.2f}"
    if unit == "%":
        return f"{value:.1f}"
    return f"{value:,.0f}"


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
        tolerance = f"±{stat.tolerance:g} pt" if stat.unit == "%" else f"±{stat.tolerance:.0%}"
        held = within(stat, value, expected)
        mark = "-" if held is None else ("yes" if held else "NO")
        unit = "" if stat.unit in ("tokens", "steps", "calls") else f" ({stat.unit})"
        source = f" ({stat.source})" if reference is None else ""
        lines.append(
            f"| {stat.what}{unit} | {_shown(expected, stat.unit)}{source} | {_shown(value, stat.unit)} | "
            f"{tolerance} | {mark} |"
        )
    lines.append(
        f"\n{measured['sessions']:,.0f} sessions, {measured['requests']:,.0f} requests"
        + ("" if reference is None else f" (reference: {reference.get('sessions', 0):,.0f} sessions)")
    )
    return "\n".join(lines)
