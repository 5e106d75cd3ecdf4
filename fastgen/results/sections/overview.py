"""Every config either side ran: how it ended (status, failed requests and sessions), its pooled hit ratio beside the
ceilings `fastgen analyze` predicted, its repeats, time and metric samples; and why a hit ratio above its ceiling
can be."""

from __future__ import annotations

from typing import Optional

from ..inference import figure
from ..report import Cell, Pair, Section, Table
from ..stats import Figure, hit_ratio
from .prompts import prompt_check

SCENARIO = None  # every scenario

NOTE = (
    "hit %: 100 x cached / prompt tokens, as the server reported them, pooled over the config's requests (the "
    "mean over runs). Status `reports`: inference-perf's reports without a bakeoff record (run by hand); "
    "`incomplete`: it ran to the end but requests or sessions failed or were lost; `failed`: it did not run to "
    "the end. Failed: failed or lost requests, and failed sessions, over every repeat."
)
CEILING_NOTE = (
    " Ceilings (--analysis, --analysis-a/-b): what `fastgen analyze` predicts the engine hits on the same "
    "requests with recorded outputs, its scheduler modelled (the point), unbounded (inf) and at the analysis's KV "
    "capacity (cap), and where the analysis has it the band: the lowest and highest hit % of its replays under other "
    "interleavings of the concurrent requests (fastgen analyze --band), the range one run of the engine can land in; a "
    "measured hit below them is eviction or sharing the engine missed, one above them is explained below "
    "the table."
)


HIT = hit_ratio()


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
            *pair.band_columns(),
            "repeats A",
            "repeats B",
            "requests A",
            "requests B",
            "seconds A",
            "seconds B",
            "metric samples A",
            "metric samples B",
        ],
        note=NOTE + (CEILING_NOTE + pair.ceiling_fleets() if pair.ceiling_columns() else ""),
    )
    section = Section("runs", "Runs", tables=[table])
    for name in names:
        runs = [side.runs.get(name) for side in pair.sides]
        both = all(runs)
        if both:
            hit_a, hit_b, hit_ratio_ = pair.triple(HIT, [name])
            hits = [hit_a, hit_b]
        else:
            hits = [figure([r.requests for r in run.repeats], HIT) if run else Figure(None, 0) for run in runs]
        row: list[Cell] = [name]
        for run in runs:
            row += [run.status, run.requests_failed, run.sessions_failed] if run else ["not run", None, None]
        row += [*hits, hit_ratio_ if both else None]
        row += pair.ceiling_cells([name]) if both else [None] * len(pair.ceiling_columns())
        row += pair.band_cells(name) if both else [None] * len(pair.band_columns())
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
    """A measured hit ratio above its ceiling, and why it can be: the ceiling is analyze's point prediction for
    the prompts it rebuilt (recorded outputs), in one interleaving of the concurrent requests."""
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
        prompts, lift = _against_analyze(pair, side, name)
        excess = hit.value - ceiling
        band = side.ceilings.band(name, "capacity" if own else "infinite")
        if lift is not None and excess - lift < ABOVE_CEILING_POINTS:
            why = f"{prompts}: the offset's tokens, cached in every later request, are the whole excess"
        elif band is not None and hit.value <= band[1] + ABOVE_CEILING_POINTS:
            why = (
                f"inside the band {band[0]:.1f}-{band[1]:.1f} % analyze gives for other interleavings of the "
                f"concurrent requests (the ceiling is one of them; {prompts})"
            )
        elif outputs == ["live"]:
            why = (
                "its outputs were live: the engine's own answers, shorter than the recorded ones, leave later "
                f"prompts less new text after the cached prefix than the prompts analyze rebuilt ({prompts})"
            )
        elif outputs == ["recorded"]:
            why = (
                f"its outputs were the recorded ones and {prompts}, so its requests interleaved otherwise than in "
                f"the point's replay (the analysis JSON's band says how far the interleaving moves the hit)"
            )
        else:
            why = (
                "either its live outputs were shorter than the recorded ones, or the engine shared prefixes the "
                f"simulation's schedule did not see (the outputs mode was not recorded; {prompts})"
            )
        found.append(
            f"{name}: {side.label} hits {hit.value:.1f} %, {excess:.1f} points above the ceiling {which}, "
            f"{ceiling:.1f} %: {why}."
        )
    return found


def _against_analyze(pair: Pair, side, name: str) -> tuple[str, Optional[float]]:
    """How the side's prompts compare with the ones analyze rebuilt for its ceiling, in words that are true to the
    run (the same tokens, the same plus a constant per request, or not), and the hit-% points a constant offset the
    Same prompts check found on this side lifts its hit ratio by (None: no such offset)."""
    entry = side.ceilings.configs.get(name) if side.ceilings else None
    check = prompt_check(pair, name)
    index = 0 if side is pair.a else 1
    sent = check.sent[index].value
    if entry is None or sent is None:
        return "its prompts were not compared with analyze's", None
    predicted, requests = entry.get("prompt_tokens"), entry.get("requests")
    if predicted is None:
        return "analyze recorded no prompt tokens to compare its prompts with", None
    if round(sent) == predicted:
        return "its prompts were analyze's own, token for token", None
    if requests and (round(sent) - predicted) % requests == 0:
        per = (round(sent) - predicted) // requests
        lift = check.lift if check.verdict == "offset" and check.lifted == ("A" if index == 0 else "B") else None
        more = f", which lift its hit % by {lift:.2f} points" if lift is not None else ""
        words = f"plus {per:,}" if per > 0 else f"less {-per:,}"
        return f"its prompts were analyze's {words} tokens on every request{more}", lift
    return f"its prompts were not analyze's ({round(sent):,} tokens against analyze's {predicted:,})", None
