"""Scenario 3, the shared-monorepo swarm: many developers' sessions over one large prefix, arriving at a fixed rate.
Hit ratio and TTFT over the run, stable against noisy prompt layouts on each engine, preemptions and evictions."""

from __future__ import annotations

from typing import Optional

from ..report import Pair, Plot, Section, Table
from ..runs import ConfigRun, RequestRecord
from ..stats import counter_delta, hit_percent, peak, ratio, side_by_side, ttft_ms
from .common import abr, engine_metric, ttft_columns, ttft_triples

SCENARIO = "scenario3"
BINS = 10  # time bins of a run for the over-time series
WIDE_MARGIN_POINTS = 10.0  # hit-ratio points by which stable must beat noisy, on both engines, to be "wide"


def layout_of(name: str, requests: list[RequestRecord]) -> str:
    for r in requests:
        if r.trace_dir.startswith(SCENARIO + "_"):
            return r.trace_dir.removeprefix(SCENARIO + "_")
    return name.rsplit("_", 1)[-1] if "_" in name else ""


def over_time(run: ConfigRun, bin_s: float) -> tuple[list[Optional[float]], list[Optional[float]]]:
    """(hit %, TTFT p95 ms) per time bin of `bin_s` seconds from the run's first request."""
    if not run.requests:
        return [None] * BINS, [None] * BINS
    t0 = min(r.start for r in run.requests)
    bins: list[list[RequestRecord]] = [[] for _ in range(BINS)]
    for r in run.requests:
        bins[min(BINS - 1, int((r.start - t0) / bin_s))].append(r)
    return [hit_percent(b) for b in bins], [ttft_ms(b, 95) for b in bins]


def _span(run: ConfigRun) -> float:
    return max(r.start for r in run.requests) - min(r.start for r in run.requests) if run.requests else 0.0


def build(pair: Pair) -> Optional[Section]:
    names = pair.configs(SCENARIO)
    if not names:
        return None
    section = Section(SCENARIO, "Scenario 3: shared-monorepo swarm",
                      intro="Sessions arrive at the config's session rate over one large shared prefix; stable "
                      "layouts keep that prefix byte-identical, noisy ones perturb it per session.")
    per_config = Table("Hit ratio and TTFT per config", ["config", "layout", "concurrency", *abr("hit %"),
                                                         *pair.ceiling_columns(), *ttft_columns()])
    pressure = Table("Cache pressure (from the sampled /metrics)",
                     ["config", *abr("peak KV %"), "preemptions A", "preemptions B", "evictions A", "evictions B"],
                     note="Preemptions: vllm:num_preemptions_total, or SGLang's retracted requests; evictions: "
                     "sglang:evicted_tokens_total (vLLM exports no eviction count). Counts are the growth over the "
                     "run; empty where the engine does not export them or no metrics were sampled.")
    levels: dict[int, dict[str, str]] = {}
    for name in names:
        a, b = pair.requests([name])
        layout = layout_of(name, a + b)
        level = pair.a.runs[name].concurrency or 0
        levels.setdefault(level, {})[layout] = name
        per_config.rows.append([name, layout, level, *side_by_side(hit_percent, a, b), *pair.ceiling_cells([name]),
                                *ttft_triples(a, b)])
        row: list = [name]
        kv = [peak(s.runs[name], engine_metric(s.runs[name], "kv_usage")) for s in (pair.a, pair.b)]
        kv = [None if v is None else 100 * v for v in kv]
        row += [kv[0], kv[1], ratio(*kv)]
        for quantity in ("preemptions", "evictions"):
            row += [counter_delta(s.runs[name], engine_metric(s.runs[name], quantity)) for s in (pair.a, pair.b)]
        pressure.rows.append(row)

    layouts = Table("Stable against noisy, per engine", ["concurrency", "side", "hit % stable", "hit % noisy",
                                                         "gap (points)", "TTFT p50 stable", "TTFT p50 noisy",
                                                         "noisy/stable"])
    for level in sorted(levels):
        pair_names = levels[level]
        if not {"stable", "noisy"} <= set(pair_names):
            continue
        gaps, engine_gap = [], []
        for side in (pair.a, pair.b):
            stable, noisy = (side.runs[pair_names[k]].requests for k in ("stable", "noisy"))
            hs, hn = hit_percent(stable), hit_percent(noisy)
            ts, tn = ttft_ms(stable, 50), ttft_ms(noisy, 50)
            gap = None if hs is None or hn is None else hs - hn
            gaps.append(gap)
            engine_gap.append((hs, hn))
            layouts.rows.append([level, side.label, hs, hn, gap, ts, tn, ratio(ts, tn)])
        section.findings.append(_verdict(level, gaps, engine_gap, pair))
    section.tables += [per_config, layouts, pressure]

    for name in names:
        bin_s = max(_span(pair.a.runs[name]), _span(pair.b.runs[name])) / BINS or 1.0
        series = {side.label: over_time(side.runs[name], bin_s) for side in (pair.a, pair.b)}
        x = [round(i * bin_s, 1) for i in range(BINS)]
        stem = name.replace("/", "_")
        section.plots.append(Plot(f"{stem}_hit_over_time", f"{name}: hit ratio over the run", "seconds from the first "
                                  "request", "hit %", x, {label: s[0] for label, s in series.items()}))
        section.plots.append(Plot(f"{stem}_ttft_over_time", f"{name}: p95 TTFT over the run", "seconds from the first "
                                  "request", "TTFT p95 (ms)", x, {label: s[1] for label, s in series.items()}))
    return section


def _verdict(level: int, gaps: list[Optional[float]], hits: list[tuple], pair: Pair) -> str:
    """The design's question: if stable beats noisy by a wide margin on both engines, prompt canonicalization
    matters more than the engine. Wide: at least WIDE_MARGIN_POINTS, and more than the engines differ by."""
    if any(g is None for g in gaps) or any(None in h for h in hits):
        return f"c{level}: not enough data for a verdict on stable against noisy"
    engine_difference = max(abs(hits[0][0] - hits[1][0]), abs(hits[0][1] - hits[1][1]))
    stated = (f"c{level}: stable beats noisy by {gaps[0]:.1f} points on {pair.a.label} and {gaps[1]:.1f} on "
              f"{pair.b.label}; the engines differ by at most {engine_difference:.1f} points on the same layout")
    if min(gaps) >= WIDE_MARGIN_POINTS and min(gaps) > engine_difference:
        return stated + ": prompt canonicalization matters more than the engine."
    return stated + ": the layout's margin is not wide on both engines, so the engine matters as much or more."
