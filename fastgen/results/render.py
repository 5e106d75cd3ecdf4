"""A report as report.json (numbers as they are) and report.md (the same, as tables a reviewer reads)."""

from __future__ import annotations

import dataclasses
import math
from typing import Optional

from .report import Pair, Section, Table

__all__ = ["REPORT_FORMAT", "report_document", "report_markdown"]

REPORT_FORMAT = 1


def _clean(value):
    if isinstance(value, float):
        return None if math.isnan(value) or math.isinf(value) else round(value, 6)
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_clean(v) for v in value]
    return value


def _side(side) -> dict:
    return {"label": side.label, "engines": side.engines, "configs": sorted(side.runs)}


def report_document(pair: Pair, sections: list[Section], problems: list[str], plots: dict[str, str]) -> dict:
    return _clean({"format": REPORT_FORMAT, "a": _side(pair.a), "b": _side(pair.b),
                   "sections": [dataclasses.asdict(s) for s in sections], "plots": plots, "problems": problems})


def _cell(column: str, value) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool) or isinstance(value, int) or isinstance(value, str):
        return str(value)
    if column.endswith("B/A") or "/" in column.split()[-1]:
        return f"{value:.2f}"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    return f"{value:.1f}" if abs(value) >= 10 else f"{value:.2f}"


def _table(table: Table) -> list[str]:
    lines = [f"**{table.title}**", "", "| " + " | ".join(table.columns) + " |",
             "|" + "|".join("---" if i == 0 else "---:" for i in range(len(table.columns))) + "|"]
    lines += ["| " + " | ".join(_cell(c, v) for c, v in zip(table.columns, row)) + " |" for row in table.rows]
    if table.note:
        lines += ["", table.note]
    return lines + [""]


def report_markdown(pair: Pair, sections: list[Section], problems: list[str], plots: dict[str, str],
                    plots_skipped: Optional[str]) -> str:
    engines = lambda side: ", ".join(side.engines) or "engine not recorded"  # noqa: E731
    lines = ["# Bakeoff report", "",
             f"- **A**: `{pair.a.label}` ({engines(pair.a)}), {len(pair.a.runs)} runs",
             f"- **B**: `{pair.b.label}` ({engines(pair.b)}), {len(pair.b.runs)} runs", "",
             "Every figure is given for A, for B, and as B/A (below 1: B is lower). Hit ratios are the servers' own "
             "cached-token counts over their prompt tokens; times are inference-perf's, client side.", ""]
    if plots_skipped:
        lines += [f"Plots: none ({plots_skipped}).", ""]
    for section in sections:
        lines += [f"## {section.title}", ""]
        if section.intro:
            lines += [section.intro, ""]
        for table in section.tables:
            if table.rows:  # a table with nothing to show (e.g. stable against noisy with one layout run) is left out
                lines += _table(table)
        if section.findings:
            lines += [f"- {finding}" for finding in section.findings] + [""]
        for plot in section.plots:
            if plot.name in plots:
                lines += [f"![{plot.title}]({plots[plot.name]})", ""]
    if problems:
        lines += ["## What could not be read", ""] + [f"- {p}" for p in problems] + [""]
    return "\n".join(lines)
