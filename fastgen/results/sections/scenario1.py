"""Scenario 1, long-context tool-call loops: does prefill cost drop as the prefix is reused, turn by turn, and how
does TTFT grow with concurrency? Tool-call turns against text turns."""

from __future__ import annotations

from typing import Optional

from ..report import Pair, Plot, Section, Table
from ..stats import hit_ratio, percentile_ms
from .common import abr, kind_of, output_tokens_table, scenario_section, status_cell, ttft_columns, ttft_triples

SCENARIO = "scenario1"
TITLE = "Scenario 1: long-context tool-call loops"
INTRO = "Six turns per session over a large stable prefix; turns 3 and 5 are forced tool calls."

TOOL_TTFT_NOTE = (
    "Tool-call turns have no TTFT, TPOT or ITL: their answer streams as tool_calls deltas, not content, "
    "and inference-perf times only content tokens. They are compared by request latency and normalized "
    "time per output token (latency / output tokens) instead."
)


def _value(cell) -> Optional[float]:
    return getattr(cell, "value", None)


def build(pair: Pair) -> Optional[Section]:
    if (opened := scenario_section(pair, SCENARIO, TITLE, INTRO)) is None:
        return None
    names, section = opened
    turns = sorted({r.turn for n in names for r in pair.a.runs[n].requests + pair.b.runs[n].requests})

    by_turn = Table("TTFT by turn (all load levels pooled)", ["turn", "kind", *ttft_columns()], note=TOOL_TTFT_NOTE)
    hits = Table(
        "Prefix-cache hit ratio by turn (server-reported cached / prompt tokens)",
        ["turn", *abr("hit %"), *pair.ceiling_columns()],
    )
    for turn in turns:
        a, b = pair.requests(names, lambda r, t=turn: r.turn == t)
        by_turn.rows.append([turn, kind_of(a + b), *ttft_triples(pair, names, lambda r, t=turn: r.turn == t)])
        hits.rows.append(
            [turn, *pair.triple(hit_ratio(), names, lambda r, t=turn: r.turn == t), *pair.ceiling_cells(names, turn)]
        )

    grid = Table(
        "By load level and turn",
        ["config", "concurrency", "turn", "kind", *abr("hit %"), *abr("TTFT p50 ms")],
        note="A turn whose hit ratio drops shows what a miss costs at that load: its TTFT rises with it.",
    )
    for name in names:
        for turn in turns:
            a, b = pair.requests([name], lambda r, t=turn: r.turn == t)
            grid.rows.append(
                [
                    name,
                    pair.a.runs[name].concurrency,
                    turn,
                    kind_of(a + b),
                    *pair.triple(hit_ratio(), [name], lambda r, t=turn: r.turn == t),
                    *pair.triple(percentile_ms("ttft", 50), [name], lambda r, t=turn: r.turn == t),
                ]
            )

    by_level = Table("TTFT by concurrency (text turns)", ["config", "concurrency", "status", *ttft_columns()])
    for name in names:
        by_level.rows.append(
            [
                name,
                pair.a.runs[name].concurrency,
                status_cell(pair, name),
                *ttft_triples(pair, [name], lambda r: r.kind == "text"),
            ]
        )

    kinds = Table(
        "Tool-call turns against text turns (all load levels pooled)",
        ["kind", *abr("latency p50 ms"), *abr("latency p95 ms"), *abr("NTPOT p50 ms")],
        note=TOOL_TTFT_NOTE,
    )
    for kind in ("text", "tool_call"):
        keep = lambda r, k=kind: r.kind == k  # noqa: E731
        kinds.rows.append(
            [
                kind,
                *pair.triple(percentile_ms("latency", 50), names, keep),
                *pair.triple(percentile_ms("latency", 95), names, keep),
                *pair.triple(percentile_ms("ntpot", 50), names, keep),
            ]
        )
    section.tables += [by_turn, hits, by_level, grid, kinds, output_tokens_table(pair, names)]

    levels = [pair.a.runs[n].concurrency for n in names]
    p95 = {n: ttft_triples(pair, [n], lambda r: r.kind == "text") for n in names}
    section.plots.append(
        Plot(
            "scenario1_ttft_p95_by_concurrency",
            "Scenario 1: p95 TTFT against concurrency",
            "concurrent sessions",
            "TTFT p95 (ms)",
            levels,
            {side.label: [_value(p95[n][3 + i]) for n in names] for i, side in enumerate(pair.sides)},
        )
    )
    text_turns = [row[0] for row in by_turn.rows if row[1] == "text"]
    rows = {row[0]: row for row in by_turn.rows}
    section.plots.append(
        Plot(
            "scenario1_ttft_by_turn",
            "Scenario 1: median TTFT by turn (text turns)",
            "turn",
            "TTFT p50 (ms)",
            text_turns,
            {side.label: [_value(rows[t][2 + i]) for t in text_turns] for i, side in enumerate(pair.sides)},
        )
    )
    hit_rows = {row[0]: row for row in hits.rows}
    section.plots.append(
        Plot(
            "scenario1_hit_by_turn",
            "Scenario 1: prefix-cache hit ratio by turn",
            "turn",
            "hit %",
            turns,
            {side.label: [_value(hit_rows[t][1 + i]) for t in turns] for i, side in enumerate(pair.sides)},
        )
    )
    return section
