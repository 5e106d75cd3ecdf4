"""The summary at the top: only the differences between A and B that survive the spread (their intervals do not
overlap), the largest first, five lines at most; and says so when none does. It looks at each config's headline
figures: hit %, TTFT p50 and p95 of the turns that stream text, output tok/s; left-out ratios (an incomplete run)
do not count, and neither do configs whose sides were not sent the same prompts (the same-prompts check): their
figures compare different work."""

from __future__ import annotations

import math
from typing import Optional

from ..report import Pair, Section
from ..stats import Figure, Ratio, hit_ratio, output_tokens_per_s, percentile_ms
from .common import content_turn
from .prompts import same_prompts

SCENARIO = None  # every scenario
LINES = 5

MEASURES = (
    ("hit %", hit_ratio(), lambda r: True),
    ("TTFT p50 ms", percentile_ms("ttft", 50), content_turn),
    ("TTFT p95 ms", percentile_ms("ttft", 95), content_turn),
)


def _number(value: Optional[float]) -> str:
    if value is None:  # not in a line: a distinguishable ratio has both values and both intervals
        return "-"
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.1f}" if abs(value) >= 10 else f"{value:.2f}"


def _line(pair: Pair, name: str, label: str, a: Figure, b: Figure, r: Ratio) -> str:
    return (
        f"{name}: {label} {_number(b.value)} on B ({pair.b.label}) against {_number(a.value)} on A "
        f"({pair.a.label}), B/A {r.value:.2f}; B [{_number(b.low)}-{_number(b.high)}], A "
        f"[{_number(a.low)}-{_number(a.high)}] (n {b.n} and {a.n})"
    )


def build(pair: Pair) -> Optional[Section]:
    names = sorted(set(pair.a.runs) & set(pair.b.runs))
    found = []
    different = [name for name in names if not same_prompts(pair, name)[3]]
    for name in (n for n in names if n not in different):
        cells = [(label, pair.triple(measure, [name], keep)) for label, measure, keep in MEASURES]
        cells.append(("output tok/s", pair.run_triple(name, lambda r, _: output_tokens_per_s(r.requests))))
        for label, (a, b, r) in cells:
            if r.distinguishable and r.value:
                found.append((-abs(math.log(r.value)), name, label, a, b, r))
    found.sort(key=lambda f: f[:3])
    section = Section("summary", "Summary")
    if not found and not different:
        section.findings.append(
            f"No difference between A ({pair.a.label}) and B ({pair.b.label}) survives the "
            f"spread: in every config's hit %, TTFT p50 and p95 (text turns) and output tok/s, "
            f"the two intervals overlap or one is missing (one run of a whole-run figure)."
        )
        return section
    room = LINES - bool(different)  # the left-out line is the last one, never cut
    shown = found if len(found) <= room else found[: room - 1]
    section.findings += [_line(pair, *f[1:]) for f in shown]
    if len(found) > len(shown):
        section.findings.append(
            f"and {len(found) - len(shown)} more differences that survive the spread, in the "
            f"tables below (B/A without ~)."
        )
    if different:
        section.findings.append(
            f"Left out: {', '.join(different)}, whose sides were not sent the same prompts (see Same prompts)."
        )
    return section
