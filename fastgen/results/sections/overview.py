"""Every config either side ran: how it ended (status, failed requests and sessions), its pooled hit ratio beside the
ceilings `fastgen analyze` predicted, its repeats, time and metric samples; and why a hit ratio above its ceiling
can be."""

from __future__ import annotations

from typing import Optional

from ..report import Cell, Pair, Section, Side, Table
from ..stats import Figure, figure, figure_ratio, hit_ratio

SCENARIO = None  # every scenario

NOTE = (
    "hit %: 100 x cached / prompt tokens, as the server reported them, pooled over the config's requests (the "
    "median over repeats). Status `reports`: inference-perf's reports without a bakeoff record (run by hand); "
    "`incomplete`: it ran to the end but requests or sessions failed or were lost; `failed`: it did not run to "
    "the end. Failed: failed or lost requests, and failed sessions, over every repeat."
)
CEILING_NOTE = (
    " Ceilings (--analysis, --analysis-a/-b): what `fastgen analyze` predicts an ideal cache hits on the "
    "same requests with recorded outputs, unbounded (inf) and at the analysis's KV capacity (cap); a "
    "measured hit below them is eviction or sharing the engine missed, one above them is explained below "
    "the table."
)


def _hit(side: Side, name: str) -> Figure:
    run = side.runs.get(name)
    return figure([r.requests for r in run.repeats], hit_ratio()) if run else Figure(None, 0)


def build(pair: Pair) -> Optional[Section]:
    names = sorted(set(pair.a.runs) | set(pair.b.runs))
    table = Table(
        "Runs",
        [
            "config",
            "status A",
            "failed requests A",
            "failed sessions A",
            "status B",
            "failed requests B",
            "failed sessions B",
            "hit % A",
            "hit % B",
            "hit % B/A",
            *pair.ceiling_columns(),
            "repeats A",
            "repeats B",
            "requests A",
            "requests B",
            "seconds A",
            "seconds B",
            "metric samples A",
            "metric samples B",
        ],
        note=NOTE + (CEILING_NOTE if pair.ceiling_columns() else ""),
    )
    section = Section("runs", "Runs", tables=[table])
    for name in names:
        runs = [side.runs.get(name) for side in pair.sides]
        hits = [_hit(side, name) for side in pair.sides]
        both = all(runs)
        row: list[Cell] = [name]
        for run in runs:
            row += [run.status, run.requests_failed, run.sessions_failed] if run else ["not run", None, None]
        row += [*hits, figure_ratio(hits[0], hits[1], pair.left_out([name])) if both else None]
        row += pair.ceiling_cells([name]) if both else [None] * len(pair.ceiling_columns())
        row += [len(r.repeats) if r else None for r in runs]
        row += [r.requests_total if r else None for r in runs]
        row += [r.seconds if r else None for r in runs]
        row += [len(r.samples) if r else None for r in runs]
        table.rows.append(row)
        if both:
            section.findings += _above_ceiling(pair, name, hits)
    return section


# Below this a hit "above" its ceiling is the rounding of two ratios over the same tokens, not something to explain:
# recorded-output runs on a real vLLM measured 0.00-0.03 points above analyze's ceiling.
ABOVE_CEILING_POINTS = 0.1


def _above_ceiling(pair: Pair, name: str, hits: list[Figure]) -> list[str]:
    """A measured hit ratio above its ceiling, and why it can be: the ceiling is what an ideal cache hits on the
    prompts analyze rebuilt (recorded outputs) in its own schedule."""
    found = []
    for side, hit in zip(pair.sides, hits):
        if side.ceilings is None or hit.value is None:
            continue
        infinite, capacity = side.ceilings.percent([name])
        # a capacity ceiling is this side's only when its own analysis was given (one for both may be the other's)
        own = capacity is not None and pair.a.ceilings is not pair.b.ceilings
        ceiling, which = (capacity, "at capacity") if own else (infinite, "unbounded")
        if ceiling is None or hit.value - ceiling < ABOVE_CEILING_POINTS:
            continue
        outputs = side.runs[name].identity_values("outputs")
        if outputs == ["live"]:
            why = (
                "its outputs were live: the engine's own answers, shorter than the recorded ones, leave later "
                "prompts less new text after the cached prefix than the prompts analyze rebuilt"
            )
        elif outputs == ["recorded"]:
            why = (
                "its prompts were analyze's own (recorded outputs), so the engine shared prefixes across sessions "
                "that the simulation's schedule did not overlap"
            )
        else:
            why = (
                "either its live outputs were shorter than the recorded ones, or the engine shared prefixes the "
                "simulation's schedule did not see (the outputs mode was not recorded)"
            )
        found.append(
            f"{name}: {side.label} hits {hit.value:.1f} %, {hit.value - ceiling:.1f} points above the {which} "
            f"ceiling {ceiling:.1f} %: {why}."
        )
    return found
