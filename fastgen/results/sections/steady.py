"""Steady state: every config's headline figures over the window where the load is what the config asks for, beside
the whole run's, which average in the ramp-up and the drain (inference-perf's replay ends only when every session
has ended).

The window of one run: from when the sessions in flight (each from its first request's start to its last request's
end) first reach the plateau (--plateau x the most in flight at once; 1.0: the peak itself) until the last session
starts. Its figures are over the requests that started inside it; output tok/s counts each request's tokens in
proportion to its time inside."""

from __future__ import annotations

from typing import Optional

from ..report import Pair, Section, Side, Table
from ..stats import (
    hit_ratio,
    in_window,
    output_tokens_per_s,
    steady_window,
    window_offsets,
    window_output_tokens_per_s,
)
from .common import TEXT_ANSWERS, TTFT, abr, status_cell

SCENARIO = None  # every scenario

MEASURES = (
    ("hit %", hit_ratio()),
    ("TTFT p50 ms", TTFT[50]),
    ("TTFT p95 ms", TTFT[95]),
)


def _window(side: Side, name: str, plateau: float) -> str:
    offsets = window_offsets([r.requests for r in side.runs[name].repeats], plateau)
    if offsets is None:
        return "none"
    peak = max((w.peak for r in side.runs[name].repeats if (w := steady_window(r.requests, plateau))), default=0)
    return f"{offsets[0]:.1f}-{offsets[1]:.1f} s, {peak} in flight"


def _steady_groups(side: Side, name: str, plateau: float) -> list:
    return [in_window(r.requests, steady_window(r.requests, plateau)) for r in side.runs[name].repeats]


def build(pair: Pair) -> Optional[Section]:
    names = sorted(
        set(pair.a.runs) & set(pair.b.runs), key=lambda n: (pair.a.runs[n].scenario, pair.a.runs[n].concurrency or 0, n)
    )
    if not names:
        return None
    plateau = pair.options.plateau
    table = Table(
        f"Whole run against steady state (TTFT of {TEXT_ANSWERS})",
        ["config", "status", "figure", "window A", "window B", *abr("whole"), *abr("steady")],
        note=f"Window: seconds from the run's first request (median over repeats) while the load is at its "
        f"plateau: from when {plateau:g} x the most sessions in flight at once are in flight until the last "
        f"session starts (--plateau); `none` where every session started before that (the run is a ramp "
        f"and a drain). TTFT of {TEXT_ANSWERS}.",
    )
    for name in names:
        status = status_cell(pair, name)
        windows = [_window(side, name, plateau) for side in pair.sides]
        for label, measure in MEASURES:
            groups_a, groups_b = (_steady_groups(side, name, plateau) for side in pair.sides)
            steady = pair.triple_of(measure, groups_a, groups_b, [name])
            table.rows.append([name, status, label, *windows, *pair.triple(measure, [name]), *steady])
        table.rows.append(
            [
                name,
                status,
                "output tok/s",
                *windows,
                *pair.run_triple(name, whole_output_tokens_per_s, what="output tok/s"),
                *pair.run_triple(
                    name,
                    lambda r, _: window_output_tokens_per_s(r.requests, steady_window(r.requests, plateau)),
                    what="steady output tok/s",
                ),
            ]
        )
    return Section("steady_state", "Steady state", intro=__doc__.split("\n\n")[1].replace("\n", " "), tables=[table])


def whole_output_tokens_per_s(repeat, _run) -> Optional[float]:
    """Output tokens per second over a whole run (a headline figure: the summary's too)."""
    return output_tokens_per_s(repeat.requests)
