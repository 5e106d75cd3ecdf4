"""With --slo-ttft-p95-ms: per scenario (and layout), per side, the largest concurrency of its sweep whose TTFT p95
of its text answers (the requests that streamed text) meets the target."""

from __future__ import annotations

from typing import Optional

from ..inference import figure
from ..report import Cell, Pair, Section, Table
from ..stats import Figure
from .common import TEXT_ANSWERS, TTFT

SCENARIO = None  # every scenario


def _layout(config: str) -> str:
    return config.split("_", 1)[1] if "_" in config else ""


def build(pair: Pair) -> Optional[Section]:
    target = pair.options.slo_ttft_p95_ms
    if target is None:
        return None
    groups: dict[tuple[str, str], list[str]] = {}
    for name in sorted(set(pair.a.runs) & set(pair.b.runs)):
        run = pair.a.runs[name]
        groups.setdefault((run.scenario, _layout(run.config)), []).append(name)
    table = Table(
        f"Largest concurrency with TTFT p95 ({TEXT_ANSWERS}) at most {target:g} ms",
        ["scenario", "layout", "concurrencies", "largest A", "TTFT p95 ms A", "largest B", "TTFT p95 ms B"],
        note=f"TTFT of {TEXT_ANSWERS} (mean over runs). A config whose run is "
        "incomplete or failed on that side is left out unless --include-incomplete; `-`: no concurrency "
        "meets the target.",
    )
    for (scenario, layout), names in sorted(groups.items()):
        names = sorted(names, key=lambda n: pair.a.runs[n].concurrency or 0)
        row: list[Cell] = [scenario, layout, ", ".join(str(pair.a.runs[n].concurrency) for n in names)]
        for side in pair.sides:
            best: Optional[tuple[Optional[int], Figure]] = None
            for name in names:
                run = side.runs[name]
                if not run.usable and not pair.options.include_incomplete:
                    continue
                p95 = figure([rep.requests for rep in run.repeats], TTFT[95])
                if p95.value is not None and p95.value <= target:
                    best = (run.concurrency, p95)
            row += list(best) if best else [None, None]
        table.rows.append(row)
    return Section("slo", "TTFT target", tables=[table])
