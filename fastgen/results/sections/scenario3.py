"""Scenario 3, the shared-monorepo swarm: many developers' sessions over one large prefix, arriving at a fixed rate.
Hit ratio and TTFT over the run (its steady-state window shaded), stable against noisy prompt layouts on each
engine, preemptions and evictions."""

from __future__ import annotations

from functools import partial
from typing import Optional

from ..inference import figure
from ..report import Pair, Plot, Section, Side, Table
from ..runs import ConfigRun, Repeat, RequestRecord
from ..stats import counter_delta, hit_ratio, over_time, ratio, window_offsets
from .common import (
    TEXT_ANSWERS,
    TTFT,
    abr,
    engine_metric,
    kv_peak_percent,
    kv_peak_tokens,
    kv_source,
    output_tokens_table,
    scenario_section,
    status_cell,
    ttft_columns,
    ttft_triples,
)

SCENARIO = "scenario3"
TITLE = "Scenario 3: shared-monorepo swarm"
INTRO = (
    "Sessions arrive at the config's session rate over one large shared prefix; stable layouts keep that "
    "prefix byte-identical, noisy ones perturb it per session."
)
HIT = hit_ratio()
BINS = 10  # time bins of a run for the over-time series
WIDE_MARGIN_POINTS = 10.0  # hit-ratio points by which stable must beat noisy, on both engines, to be "wide"
# The plots of a config over its run: (file stem suffix, caption, y-axis label, the series' index in what
# stats.over_time returns), one per metric it bins.
OVER_TIME_PLOTS = (
    ("hit_over_time", "hit ratio over the run", "hit %", 0),
    ("ttft_over_time", "p95 TTFT over the run", "TTFT p95 (ms)", 1),
)


def layout_of(name: str, requests: list[RequestRecord]) -> str:
    for r in requests:
        if r.trace_dir.startswith(SCENARIO + "_"):
            return r.trace_dir.removeprefix(SCENARIO + "_")
    return name.rsplit("_", 1)[-1] if "_" in name else ""


def _span(side: Side, name: str) -> float:
    spans = [
        max(r.start for r in rep.requests) - min(r.start for r in rep.requests)
        for rep in side.runs[name].repeats
        if rep.requests
    ]
    return max(spans) if spans else 0.0


def build(pair: Pair) -> Optional[Section]:
    if (opened := scenario_section(pair, SCENARIO, TITLE, INTRO)) is None:
        return None
    names, section = opened
    per_config = Table(
        f"Hit ratio and TTFT of {TEXT_ANSWERS} per config",
        ["config", "layout", "concurrency", "status", *abr("hit %"), *pair.ceiling_columns(), *ttft_columns()],
    )
    pressure = Table(
        "Cache pressure (from the sampled /metrics)",
        [
            "config",
            "peak KV % A",
            "peak KV % B",
            *abr("peak KV tokens"),
            "preemptions A",
            "preemptions B",
            "evictions A",
            "evictions B",
        ],
        note="Peak KV: the largest sampled count of KV tokens in use by running requests during a run, in tokens "
        "and in % of the KV capacity the run recorded (no B/A of percentages of two cache sizes): "
        + kv_source([side.runs[n] for side in pair.sides for n in names])
        + ". Preemptions: "
        "vllm:num_preemptions_total, or SGLang's retracted requests; evictions: "
        "sglang:evicted_tokens_total (vLLM exports no eviction count). Counts are the growth over the "
        "run (mean over runs); empty where the engine does not export them or no metrics were "
        "sampled.",
    )
    levels: dict[int, dict[str, str]] = {}
    for name in names:
        a, b = pair.requests([name])
        layout = layout_of(name, a + b)
        level = pair.a.runs[name].concurrency or 0
        levels.setdefault(level, {})[layout] = name
        per_config.rows.append(
            [
                name,
                layout,
                level,
                status_cell(pair, name),
                *pair.triple(HIT, [name]),
                *pair.ceiling_cells([name]),
                *ttft_triples(pair, [name]),
            ]
        )
        kv = pair.run_sides(name, kv_peak_percent, upper=100.0)
        row: list = [name, *kv, *pair.run_triple(name, kv_peak_tokens, what="peak KV tokens")]
        for quantity in ("preemptions", "evictions"):  # A and B (no B/A)
            row += pair.run_sides(name, partial(_counter_delta, quantity))
        pressure.rows.append(row)

    layouts = Table(
        f"Stable against noisy, per engine (TTFT of {TEXT_ANSWERS})",
        [
            "concurrency",
            "side",
            "hit % stable",
            "hit % noisy",
            "gap (points)",
            "TTFT p50 stable",
            "TTFT p50 noisy",
            "noisy/stable",
        ],
    )
    for level in sorted(levels):
        pair_names = levels[level]
        if not {"stable", "noisy"} <= set(pair_names):
            continue
        gaps, engine_gap = [], []
        for side in pair.sides:
            stable, noisy = ([r.requests for r in side.runs[pair_names[k]].repeats] for k in ("stable", "noisy"))
            hs, hn = figure(stable, HIT), figure(noisy, HIT)
            ts, tn = figure(stable, TTFT[50]), figure(noisy, TTFT[50])
            gap = None if hs.value is None or hn.value is None else hs.value - hn.value
            gaps.append(gap)
            engine_gap.append((hs.value, hn.value))
            layouts.rows.append([level, side.label, hs, hn, gap, ts, tn, ratio(ts.value, tn.value)])
        section.findings.append(_verdict(level, gaps, engine_gap, pair))
    section.tables += [per_config, layouts, pressure, output_tokens_table(pair, names)]

    for name in names:
        bin_s = max(_span(pair.a, name), _span(pair.b, name)) / BINS or 1.0
        series = {
            side.label: over_time([r.requests for r in side.runs[name].repeats], bin_s, BINS) for side in pair.sides
        }
        shade = {
            side.label: list(span)
            for side in pair.sides
            if (span := window_offsets([r.requests for r in side.runs[name].repeats], pair.options.plateau))
        }
        x = [round(i * bin_s, 1) for i in range(BINS)]
        stem = name.replace("/", "_")
        for suffix, caption, y_label, index in OVER_TIME_PLOTS:
            section.plots.append(
                Plot(
                    f"{stem}_{suffix}",
                    f"{name}: {caption}",
                    "seconds from the first request (shaded: steady state)",
                    y_label,
                    x,
                    {label: s[index] for label, s in series.items()},
                    shade=shade,
                )
            )
    return section


def _counter_delta(quantity: str, repeat: Repeat, run: ConfigRun) -> Optional[float]:
    return counter_delta(repeat, engine_metric(run, quantity))


def _verdict(level: int, gaps: list[Optional[float]], hits: list[tuple], pair: Pair) -> str:
    """The design's question: if stable beats noisy by a wide margin on both engines, prompt canonicalization
    matters more than the engine. Wide: at least WIDE_MARGIN_POINTS, and more than the engines differ by."""
    if any(g is None for g in gaps) or any(None in h for h in hits):
        return f"c{level}: not enough data for a verdict on stable against noisy"
    widths = [g for g in gaps if g is not None]  # every one
    engine_difference = max(abs(hits[0][0] - hits[1][0]), abs(hits[0][1] - hits[1][1]))
    stated = (
        f"c{level}: stable beats noisy by {widths[0]:.1f} points on {pair.a.label} and {widths[1]:.1f} on "
        f"{pair.b.label}; the engines differ by at most {engine_difference:.1f} points on the same layout"
    )
    if min(widths) >= WIDE_MARGIN_POINTS and min(widths) > engine_difference:
        return stated + ": prompt canonicalization matters more than the engine."
    return stated + ": the layout's margin is not wide on both engines, so the engine matters as much or more."
