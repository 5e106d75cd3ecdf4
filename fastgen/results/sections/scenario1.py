"""Scenario 1, long-context tool-call loops: does prefill cost drop as the prefix is reused, turn by turn, and how
does TTFT grow with concurrency? Tool-call turns against text turns."""

from __future__ import annotations

from typing import Optional

from ..report import Pair, Plot, Section, Table
from ..stats import hit_ratio, percentile_ms
from .common import (
    TEXT_ANSWERS,
    TTFT,
    abr,
    kind_of,
    output_tokens_table,
    scenario_section,
    status_cell,
    ttft_columns,
    ttft_triples,
)

SCENARIO = "scenario1"
TITLE = "Scenario 1: long-context tool-call loops"
INTRO = "Six turns per session over a large stable prefix; turns 3 and 5 are recorded as tool calls."

TOOL_TTFT_NOTE = (
    f"TTFT of {TEXT_ANSWERS}: a turn answered with a tool call has no TTFT, TPOT or ITL (its answer streams as "
    "tool_calls deltas, not content, and inference-perf times only content tokens); a turn recorded as a tool "
    "call that the engine answered with text has them (kind: how many). Tool calls are compared by request "
    "latency and normalized time per output token (latency / output tokens) instead."
)
HIT = hit_ratio()
LATENCY = {q: percentile_ms("latency", q) for q in (50, 95)}
NTPOT = percentile_ms("ntpot", 50)


def _answered_intro(pair: Pair, names: list[str]) -> str:
    """The intro, true to the run: how each side answered the turns recorded as tool calls."""
    parts = []
    for side in pair.sides:
        calls = [r for n in names for r in side.runs[n].requests if r.kind == "tool_call" and not r.failed]
        known = [r for r in calls if r.answered is not None]
        if not calls or not known:
            continue
        as_calls = sum(r.answered == "tool_call" for r in known)
        parts.append(f"{side.label} answered {as_calls} of {len(known)} of them with a tool call")
    if not parts:
        return INTRO
    return INTRO[:-1] + ": " + "; ".join(parts) + " (Same prompts: turn kinds)."


def _value(cell) -> Optional[float]:
    return getattr(cell, "value", None)


def build(pair: Pair) -> Optional[Section]:
    if (opened := scenario_section(pair, SCENARIO, TITLE, INTRO)) is None:
        return None
    names, section = opened
    section.intro = _answered_intro(pair, names)
    turns = sorted({r.turn for n in names for r in pair.a.runs[n].requests + pair.b.runs[n].requests})
    by_turn, hits = _by_turn(pair, names, turns)
    section.tables += [
        by_turn,
        hits,
        _by_level(pair, names),
        _grid(pair, names, turns),
        _kinds(pair, names),
        output_tokens_table(pair, names),
    ]
    section.plots += _plots(pair, names, turns, by_turn=by_turn, hits=hits)
    return section


def _by_turn(pair: Pair, names: list[str], turns: list[int]) -> tuple[Table, Table]:
    by_turn = Table(
        f"TTFT of {TEXT_ANSWERS} by turn (all load levels pooled)",
        ["turn", "kind", *ttft_columns()],
        note=TOOL_TTFT_NOTE,
    )
    hits = Table(
        "Prefix-cache hit ratio by turn (server-reported cached / prompt tokens)",
        ["turn", *abr("hit %"), *pair.ceiling_columns()],
    )
    for turn in turns:
        a, b = pair.requests(names, lambda r, t=turn: r.turn == t)
        by_turn.rows.append([turn, kind_of(a + b), *ttft_triples(pair, names, lambda r, t=turn: r.turn == t)])
        hits.rows.append(
            [turn, *pair.triple(HIT, names, lambda r, t=turn: r.turn == t), *pair.ceiling_cells(names, turn)]
        )
    return by_turn, hits


def _grid(pair: Pair, names: list[str], turns: list[int]) -> Table:
    grid = Table(
        f"By load level and turn (TTFT of {TEXT_ANSWERS})",
        ["config", "concurrency", "turn", "kind", *abr("hit %"), *abr("TTFT p50 ms")],
        note=f"TTFT of {TEXT_ANSWERS}. A turn whose hit ratio drops shows what a miss costs at that load: its "
        "TTFT rises with it.",
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
                    *pair.triple(HIT, [name], lambda r, t=turn: r.turn == t),
                    *pair.triple(TTFT[50], [name], lambda r, t=turn: r.turn == t),
                ]
            )
    return grid


def _by_level(pair: Pair, names: list[str]) -> Table:
    by_level = Table(f"TTFT of {TEXT_ANSWERS} by concurrency", ["config", "concurrency", "status", *ttft_columns()])
    for name in names:
        by_level.rows.append(
            [name, pair.a.runs[name].concurrency, status_cell(pair, name), *ttft_triples(pair, [name])]
        )
    return by_level


def _kinds(pair: Pair, names: list[str]) -> Table:
    kinds = Table(
        "Tool-call turns against text turns, as recorded and as answered (all load levels pooled)",
        ["recorded kind", "answered", *abr("latency p50 ms"), *abr("latency p95 ms"), *abr("NTPOT p50 ms")],
        note=TOOL_TTFT_NOTE + " Answered: what the engine streamed (Same prompts: turn kinds); `-` where "
        "inference-perf recorded no answer.",
    )
    requests = [r for n in names for side in pair.sides for r in side.runs[n].requests]
    for kind in ("text", "tool_call"):
        for answered in sorted({r.answered or "-" for r in requests if r.kind == kind}):
            keep = lambda r, k=kind, a=answered: r.kind == k and (r.answered or "-") == a  # noqa: E731
            kinds.rows.append(
                [
                    kind,
                    answered,
                    *pair.triple(LATENCY[50], names, keep),
                    *pair.triple(LATENCY[95], names, keep),
                    *pair.triple(NTPOT, names, keep),
                ]
            )
    return kinds


def _plots(pair: Pair, names: list[str], turns: list[int], *, by_turn: Table, hits: Table) -> list[Plot]:
    levels = [pair.a.runs[n].concurrency for n in names]
    p95 = {n: ttft_triples(pair, [n]) for n in names}
    text_turns = [row[0] for row in by_turn.rows if _value(row[2]) is not None or _value(row[3]) is not None]
    rows = {row[0]: row for row in by_turn.rows}
    hit_rows = {row[0]: row for row in hits.rows}
    return [
        Plot(
            "scenario1_ttft_p95_by_concurrency",
            f"Scenario 1: p95 TTFT of {TEXT_ANSWERS} against concurrency",
            "concurrent sessions",
            "TTFT p95 (ms)",
            levels,
            {side.label: [_value(p95[n][3 + i]) for n in names] for i, side in enumerate(pair.sides)},
        ),
        Plot(
            "scenario1_ttft_by_turn",
            f"Scenario 1: median TTFT of {TEXT_ANSWERS} by turn",
            "turn",
            "TTFT p50 (ms)",
            text_turns,
            {side.label: [_value(rows[t][2 + i]) for t in text_turns] for i, side in enumerate(pair.sides)},
        ),
        Plot(
            "scenario1_hit_by_turn",
            "Scenario 1: prefix-cache hit ratio by turn",
            "turn",
            "hit %",
            turns,
            {side.label: [_value(hit_rows[t][1 + i]) for t in turns] for i, side in enumerate(pair.sides)},
        ),
    ]
