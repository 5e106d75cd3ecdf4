"""A report as report.json (numbers as they are) and report.md (the same, as tables a reviewer reads).

report.json (format 4): {"format", "a", "b", "options", "cells", "sections", "plots", "problems"}; a section is
{"id", "title", "intro", "tables", "plots", "findings", "problems"}, a table {"title", "columns", "rows", "note"}. A
row's cell is a number, a string, null, or one of two small dicts (described again under "cells"):
- a figure: {"value", "n", "low", "high", "repeats", "sessions", "too_few", "df", "informative", "needs_runs"}:
  value is the mean over runs of each run's value, n the requests behind it (sessions for sessions/h), [low, high]
  its 95% interval over its sessions and runs (inference.py), repeats how many runs and sessions how many sessions
  it rests on (0: a figure of whole runs), too_few why it has no interval; df the interval's degrees of freedom,
  informative false where they are too few for it to say anything (inference.MIN_INTERVAL_RUNS; report.md prints
  "needs N runs" instead of the range: needs_runs, null where more sessions are what it needs);
- a ratio (the B/A columns): {"value", "low", "high", "distinguishable", "left_out", "too_few", "p", "margin",
  "sessions", "offset_free", "df", "informative", "needs_runs"}: [low, high] its 95% interval, p the p-value of its test against its margin, distinguishable whether
  it is a difference once the tests of its family are corrected (null: not tested), too_few why it was
  not tested, left_out why a value is withheld (an incomplete or failed run, unless --include-incomplete); df,
  informative and needs_runs (runs a side) as a figure's.
The first section, "answers" (sections/answers.py), is the first page: report.md prints it above everything else,
its sentences only; its table holds the figures behind each sentence.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Optional

from .inference import MIN_INTERVAL_RUNS, MIN_RUNS, MIN_SESSIONS
from .report import Pair, Section, Table
from .sections.answers import FIRST_PAGE
from .sections.common import interval_text, number, ratio_state
from .stats import P99_MIN_REQUESTS, Figure, Ratio

__all__ = ["REPORT_FORMAT", "report_document", "report_markdown"]

# 3: figures are means over runs with t intervals; B/A tested (p, margin), decided together. 4: each interval says
# whether it is informative (df, informative, needs_runs); the first page (section "answers")
REPORT_FORMAT = 4
CELLS = {
    "figure": "{value, n, low, high, repeats, sessions, too_few, df, informative, needs_runs}: mean over runs of "
    "each run's value; n requests behind it; [low, high] its 95% interval over sessions and runs; too_few: why it "
    "has none; informative: false where its df (degrees of freedom) are under what "
    f"{MIN_INTERVAL_RUNS} runs give its runs' spread, and needs_runs the runs that would make it so (null: more "
    "sessions)",
    "ratio": "{value, low, high, distinguishable, left_out, too_few, p, margin, sessions, offset_free, df, "
    "informative, needs_runs}: B/A with its 95% interval; distinguishable: a difference after the report's "
    "Benjamini-Hochberg correction (null: not tested); too_few or left_out: why not tested; df, informative, "
    "needs_runs (runs a side): as a figure's",
}


def _clean(value):
    if isinstance(value, float):
        return None if math.isnan(value) or math.isinf(value) else round(value, 6)
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_clean(v) for v in value]
    return value


def _side(side) -> dict:
    return {
        "label": side.label,
        "engines": side.engines,
        "configs": sorted(side.runs),
        "ceilings": side.ceilings.describe() if side.ceilings else None,
    }


def report_document(pair: Pair, sections: list[Section], problems: list[str], plots: dict[str, str]) -> dict:
    return _clean(
        {
            "format": REPORT_FORMAT,
            "a": _side(pair.a),
            "b": _side(pair.b),
            "options": dataclasses.asdict(pair.options),
            "cells": CELLS,
            "sections": [dataclasses.asdict(s) for s in sections],
            "plots": plots,
            "problems": problems,
        }
    )


def _number(value: float, ratio: bool = False) -> str:
    return f"{value:.2f}" if ratio else number(value)


def _cell(column: str, value) -> str:
    if isinstance(value, Figure):
        behind = [f"{value.sessions} sessions"] if value.sessions else []
        behind += [f"{value.repeats} runs"] if value.repeats > 1 else []
        suffix = f" ({', '.join(behind)})" if behind else ""
        if value.value is None:
            return f"- (n={value.n}{', ' + ', '.join(behind) if behind else ''})" if value.n else "-"
        spread = interval_text(value)
        return f"{_number(value.value)}{' ' + spread if spread else ''} n={value.n}{suffix}"
    if isinstance(value, Ratio):
        state = ratio_state(value)
        if state == "left out":
            return f"excl. ({value.left_out})"
        if state == "none":
            return "-"
        mark = {"too few": " (too few)", "needs runs": " (too few runs)", "difference": ""}.get(state, " ~")
        return f"{value.value:.2f}{mark}" + (" offset-free" if value.offset_free and state != "too few" else "")
    if value is None:
        return "-"
    if isinstance(value, bool) or isinstance(value, int) or isinstance(value, str):
        return (
            f"{value:,}"
            if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10000
            else str(value)
        )
    return _number(value, column.endswith("B/A") or "/" in column.split()[-1])


def _table(table: Table) -> list[str]:
    lines = [
        f"**{table.title}**",
        "",
        "| " + " | ".join(table.columns) + " |",
        "|" + "|".join("---" if i == 0 else "---:" for i in range(len(table.columns))) + "|",
    ]
    lines += ["| " + " | ".join(_cell(c, v) for c, v in zip(table.columns, row)) + " |" for row in table.rows]
    if table.note:
        lines += ["", table.note]
    return lines + [""]


READING = (
    "Every figure is given for A, for B, and as B/A (below 1: B is lower). A figure reads `value [low-high] "
    "n=N (S sessions, K runs)`: the mean over K runs of each run's value, N requests and S sessions behind it "
    "(sessions/h: N sessions), [low-high] its 95% interval over the sessions (resampled whole) and the runs; "
    f"none under {MIN_SESSIONS} sessions, or, for a figure of whole runs (throughput, a KV peak), under "
    f"{MIN_RUNS} runs. `[needs {MIN_INTERVAL_RUNS} runs]` in its place: the interval rests on how {MIN_RUNS} runs "
    "spread, one degree of freedom (t = 12.7), and would span orders of magnitude; it is shown once its degrees of "
    f"freedom reach what {MIN_INTERVAL_RUNS} runs a side give (report.json keeps the range, informative: false). "
    "A B/A is tested: B/A alone is a difference, its 95% interval beyond its margin after "
    "the tests are corrected (the rule is in the summary); `~`: not shown to differ; "
    "`(too few)`: too few sessions or runs to tell; `offset-free`: a hit ratio's B/A with one "
    "side's constant prompt offset taken out (Same prompts). The test pairs the two sides' sessions (both ran the same "
    "ones), so a B/A can be a difference while the two sides' own intervals overlap. Percentiles need "
    f"1/(1-q) requests in each run (p95: 20, p99: {P99_MIN_REQUESTS}; `- (n=N)` otherwise: it would be the "
    "maximum). `excl. (incomplete)`: a run of that config failed or lost requests or sessions on a side; its "
    "figures are shown but left out of B/A (--include-incomplete puts them in). Hit ratios are the servers' own "
    "cached-token counts over their prompt tokens; times are inference-perf's, client side; TTFT, TPOT and ITL "
    "are of the text answers (the requests that streamed text)."
)


def report_markdown(
    pair: Pair, sections: list[Section], problems: list[str], plots: dict[str, str], plots_skipped: Optional[str]
) -> str:
    engines = lambda side: ", ".join(side.engines) or "engine not recorded"  # noqa: E731
    lines = [
        "# Bakeoff report",
        "",
        f"- **A**: `{pair.a.label}` ({engines(pair.a)}), {len(pair.a.runs)} configs",
        f"- **B**: `{pair.b.label}` ({engines(pair.b)}), {len(pair.b.runs)} configs",
        "",
    ]
    first = [s for s in sections if s.id == FIRST_PAGE]
    for section in first:  # the first page: its sentences (report.json has the figures behind them too)
        lines += [f"## {section.title}", "", *([section.intro, ""] if section.intro else [])]
        lines += [f"- {finding}" for finding in section.findings] + [""]
    lines += [READING, ""]
    if problems:
        lines += [f"**{len(problems)} problems** were found; they are listed at the end.", ""]
    if plots_skipped:
        lines += [f"Plots: none ({plots_skipped}).", ""]
    for section in (s for s in sections if s.id != FIRST_PAGE):
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
        lines += ["## Problems", ""] + [f"- {p}" for p in problems] + [""]
    return "\n".join(lines)
