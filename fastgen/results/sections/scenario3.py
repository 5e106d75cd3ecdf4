"""Scenario 3, the shared-monorepo swarm: many developers' sessions over one large prefix, arriving at a fixed rate.
Hit ratio and TTFT over the run (its steady-state window shaded), stable against noisy prompt layouts on each
engine, preemptions and evictions."""

from __future__ import annotations

from functools import partial
from typing import Optional

from ..inference import figure
from ..report import Pair, Plot, Section, Side, Table
from ..runs import ConfigRun, Repeat, RequestRecord
from ..stats import Figure, counter_delta, hit_ratio, over_time, ratio, window_offsets
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
    per_config, pressure = _per_config(pair, names)
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
    for level, found in stable_noisy(pair).items():
        for side, (hs, hn, ts, tn) in zip(pair.sides, found):
            layouts.rows.append([level, side.label, hs, hn, gap(hs, hn), ts, tn, ratio(ts.value, tn.value)])
        section.findings.append(_verdict(level, found, pair))
    section.tables += [per_config, layouts, pressure, output_tokens_table(pair, names)]
    for name in names:
        section.plots += _over_time_plots(pair, name)
    return section


def _per_config(pair: Pair, names: list[str]) -> tuple[Table, Table]:
    """(hit ratio and TTFT per config, the cache's pressure per config)"""
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
    for name in names:
        a, b = pair.requests([name])
        layout = layout_of(name, a + b)
        level = pair.a.runs[name].concurrency or 0
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
    return per_config, pressure


def _over_time_plots(pair: Pair, name: str) -> list[Plot]:
    bin_s = max(_span(pair.a, name), _span(pair.b, name)) / BINS or 1.0
    series = {side.label: over_time([r.requests for r in side.runs[name].repeats], bin_s, BINS) for side in pair.sides}
    shade = {
        side.label: list(span)
        for side in pair.sides
        if (span := window_offsets([r.requests for r in side.runs[name].repeats], pair.options.plateau))
    }
    x = [round(i * bin_s, 1) for i in range(BINS)]
    stem = name.replace("/", "_")
    return [
        Plot(
            f"{stem}_{suffix}",
            f"{name}: {caption}",
            "seconds from the first request (shaded: steady state)",
            y_label,
            x,
            {label: s[index] for label, s in series.items()},
            shade=shade,
        )
        for suffix, caption, y_label, index in OVER_TIME_PLOTS
    ]


def _counter_delta(quantity: str, repeat: Repeat, run: ConfigRun) -> Optional[float]:
    return counter_delta(repeat, engine_metric(run, quantity))


# Per side, (hit % stable, hit % noisy, TTFT p50 stable, TTFT p50 noisy) of one concurrency level
Layouts = list[tuple[Figure, Figure, Figure, Figure]]


def stable_noisy(pair: Pair) -> dict[int, Layouts]:
    """Each concurrency level that ran both a stable and a noisy config: per side (A, B), its stable and noisy hit %
    and TTFT p50 (computed once: the table and the first page show the same)."""
    return pair.tests.memo(("stable_noisy",), lambda: _stable_noisy(pair))


def _stable_noisy(pair: Pair) -> dict[int, Layouts]:
    levels: dict[int, dict[str, str]] = {}
    for name in pair.configs(SCENARIO):
        a, b = pair.requests([name])
        levels.setdefault(pair.a.runs[name].concurrency or 0, {})[layout_of(name, a + b)] = name
    found: dict[int, Layouts] = {}
    for level, names in sorted(levels.items()):
        if {"stable", "noisy"} <= set(names):
            found[level] = []
            for side in pair.sides:
                stable, noisy = ([r.requests for r in side.runs[names[k]].repeats] for k in ("stable", "noisy"))
                found[level].append(
                    (figure(stable, HIT), figure(noisy, HIT), figure(stable, TTFT[50]), figure(noisy, TTFT[50]))
                )
    return found


def gap(stable: Figure, noisy: Figure) -> Optional[float]:
    """Hit-% points by which stable beats noisy (None: a side has no hit ratio)."""
    return None if stable.value is None or noisy.value is None else stable.value - noisy.value


def wide(found: Layouts) -> tuple[Optional[bool], float]:
    """The design's question for one level: does stable beat noisy by a wide margin on both engines (at least
    WIDE_MARGIN_POINTS, and more than the engines differ by on the same layout)? (None: not enough data; the
    engines' largest difference on one layout, in points.)"""
    gaps = [gap(hs, hn) for hs, hn, _, _ in found]
    if any(g is None for g in gaps):  # a gap is None exactly where a hit ratio is
        return None, 0.0
    (sa, na), (sb, nb) = ((hs.value or 0.0, hn.value or 0.0) for hs, hn, _, _ in found)
    engines = max(abs(sa - sb), abs(na - nb))
    smallest = min(g or 0.0 for g in gaps)
    return smallest >= WIDE_MARGIN_POINTS and smallest > engines, engines


def _verdict(level: int, found: Layouts, pair: Pair) -> str:
    """If stable beats noisy by a wide margin on both engines, prompt canonicalization matters more than the
    engine (wide())."""
    verdict, engines = wide(found)
    if verdict is None:
        return f"c{level}: not enough data for a verdict on stable against noisy"
    gaps = [gap(hs, hn) or 0.0 for hs, hn, _, _ in found]
    stated = (
        f"c{level}: stable beats noisy by {gaps[0]:.1f} points on {pair.a.label} and {gaps[1]:.1f} on "
        f"{pair.b.label}; the engines differ by at most {engines:.1f} points on the same layout"
    )
    if verdict:
        return stated + ": prompt canonicalization matters more than the engine."
    return stated + ": the layout's margin is not wide on both engines, so the engine matters as much or more."
