"""The first page: each question the benchmark asks (docs/benchmark.md) in one sentence a manager reads: the figure on both sides, B/A with its 95 % interval, and whether the report's rule calls it a difference.

Nothing here is computed again: the figures are the summary's headline ones (summary.headline: per config its hit %,
TTFT p50 and p95 of text answers and output tok/s, the very tests the Runs, Steady state and Throughput tables show,
decided in the headline family) and scenario 3's stable against noisy (scenario3.stable_noisy, its table's). Per
question, one config leads: the one whose B/A lies farthest from 1 among the differences, else among those tested,
else the first with a figure; the others are counted. The wide tables follow, with every config."""

from __future__ import annotations

import math
from typing import Optional

from ..report import Cell, Pair, Section, Table
from ..stats import Figure, Ratio
from . import scenario3
from .common import TEXT_ANSWERS, interval_text, number, ratio_state
from .summary import OUTPUT, compared_configs, headline

SCENARIO = None  # every scenario
FIRST_PAGE = "answers"  # the section's id: report.md prints it first (render.py)

HIT = "hit %"
# (question, the scenario it asks of (None: every config), the headline figure that answers it, it in words, its
# unit)
QUESTIONS = (
    ("Does the engine reuse one agent's growing prefix?", "scenario1", HIT, "hit ratio", " %"),
    ("Does it reuse a forked context across parallel branches?", "scenario2", HIT, "hit ratio", " %"),
    ("Does it reuse a large prefix shared by many sessions?", "scenario3", HIT, "hit ratio", " %"),
    ("Latency, the median turn:", None, f"TTFT p50 ms ({TEXT_ANSWERS})", f"TTFT p50 of {TEXT_ANSWERS}", " ms"),
    ("Latency, the slow turns:", None, f"TTFT p95 ms ({TEXT_ANSWERS})", f"TTFT p95 of {TEXT_ANSWERS}", " ms"),
    ("Throughput:", None, OUTPUT, "output tokens per second", " tok/s"),
)
STABLE_NOISY = "Does a stable prompt order beat a noisy one?"
GAP = "hit % stable - noisy (points)"
INTRO = (
    "Each question of the benchmark in one sentence: the figure on B and on A, B/A with its 95 % interval, and the "
    "verdict of the report's rule (Summary). Where a question spans several configs, the one whose B/A lies "
    "farthest from 1 is named (a difference first), and the rest are counted; the tables below hold every config."
)
# configs: how many the question spans; differences, too few: how many of them the rule calls so
COLUMNS = ["question", "figure", "config", "A", "B", "B/A", "verdict", "configs", "differences", "too few"]

Found = tuple[str, Figure, Figure, Ratio]  # a config and its (A, B, B/A)


def build(pair: Pair) -> Optional[Section]:
    names = compared_configs(pair)
    if not names:
        return None
    figures = {name: dict(headline(pair, name)) for name in names}
    section = Section(FIRST_PAGE, "What this report answers", intro=INTRO)
    table = Table("The figures behind each answer", COLUMNS)
    for question, scenario, label, words, unit in QUESTIONS:
        found = [
            (name, *figures[name][label])
            for name in names
            if scenario is None or pair.a.runs[name].scenario == scenario
        ]
        sentence, row = _answer(pair, (question, label, words, unit), found)
        section.findings.append(sentence)
        table.rows.append(row)
        if scenario == "scenario3":
            sentence, rows = _stable_noisy(pair)
            section.findings.append(sentence)
            table.rows += rows
    section.tables.append(table)
    return section


def _far(found: Found) -> float:
    value = found[3].value
    return abs(math.log(value)) if value else 0.0


def lead(found: list[Found]) -> Optional[Found]:
    """The config a question's sentence names: the B/A farthest from 1 among the differences, else among the B/A
    tested, else the first config with a figure (None: no figure at all)."""
    for group in (
        [f for f in found if f[3].distinguishable],
        [f for f in found if f[3].p is not None],
        [f for f in found if any(x.value is not None for x in f[1:])],
    ):
        if group:
            return max(group, key=_far)  # the first of equals: configs are in name order
    return None


def verdict(r: Ratio) -> str:
    """What the report's rule says of a B/A, in words."""
    words = {
        "left out": f"not compared ({r.left_out} run)",
        "none": "no B/A (a side has no figure)",
        "too few": f"too few to tell ({r.too_few})",
        "difference": f"a difference, B {'higher' if (r.value or 0) > 1 else 'lower'}",
        "corrected": "not a difference once the report's many tests are corrected (Summary)",
        "needs runs": "too few runs to tell either way",  # "not a difference" beside a B/A of 3 would say "the same"
        "same": "not a difference by the report's rule",
        "untested": "not tested",
    }
    return words[ratio_state(r)]


def _answer(pair: Pair, asked: tuple[str, str, str, str], found: list[Found]) -> tuple[str, list[Cell]]:
    """One question's sentence and row: `asked` is (question, the figure's label, in words, unit)."""
    question, label, words, unit = asked
    chosen = lead(found)
    if chosen is None:
        none = "no config of it ran on both sides" if not found else "no figure on either side"
        return f"**{question}** Not answered: {none}.", [
            question,
            label,
            None,
            None,
            None,
            None,
            none,
            len(found),
            0,
            0,
        ]
    name, a, b, r = chosen
    interval = interval_text(r) if not r.too_few else ""
    ratio = f", B/A {r.value:.2f}{' ' + interval if interval else ''}" if r.value is not None else ""
    differ = sum(bool(f[3].distinguishable) for f in found)
    few = sum(ratio_state(f[3]) in ("too few", "needs runs") for f in found)
    counted = ""
    if len(found) > 1:
        counted = f"; {differ} of {len(found)} configs differ{'s' if differ == 1 else ''}"
        counted += f", {few} too few to tell" if few else ""
    sentence = (
        f"**{question}** The {words} on {name}: {number(b.value)}{unit} on B ({pair.b.label}) against "
        f"{number(a.value)}{unit} on A ({pair.a.label}){ratio}: {verdict(r)}{counted}."
    )
    return sentence, [question, label, name, a, b, r, verdict(r), len(found), differ, few]


def _stable_noisy(pair: Pair) -> tuple[str, list[list[Cell]]]:
    """Scenario 3's verdict on the prompt layouts, level by level: the gaps in hit-% points on each side, and
    whether they are wide on both engines (the design's verdict, scenario3.wide: a rule of its own, not a test);
    a row per level."""
    levels = scenario3.stable_noisy(pair)
    if not levels:
        none = "no load level ran both a stable and a noisy config on both sides"
        return f"**{STABLE_NOISY}** Not answered: {none}.", [[STABLE_NOISY, GAP, None, None, None, None, none, 0, 0, 0]]
    parts: list[str] = []
    rows: list[list[Cell]] = []
    wide: dict[int, Optional[bool]] = {}
    for level, found in levels.items():
        gaps = [scenario3.gap(hs, hn) for hs, hn, _, _ in found]
        parts.append(f"at c{level} by {_points(gaps[0])} points on A and {_points(gaps[1])} on B")
        wide[level] = scenario3.wide(found)[0]
        said = {True: "wide on both engines", False: "not wide on both engines", None: "not enough data"}[wide[level]]
        rows.append([STABLE_NOISY, GAP, f"c{level}", gaps[0], gaps[1], None, said, None, None, None])
    known = {level: yes for level, yes in wide.items() if yes is not None}
    if not known:
        said = "not enough data for a verdict"
    elif all(known.values()):
        said = "wide on both engines at every level, so prompt canonicalization matters more than the engine"
    elif not any(known.values()):
        said = "not wide on both engines at any level, so the engine matters as much as the layout, or more"
    else:
        said = f"wide on both engines at {', '.join(f'c{level}' for level, yes in known.items() if yes)} only"
    text = (
        f"**{STABLE_NOISY}** Stable beat noisy {', '.join(parts)}: {said} (the design's verdict: at least "
        f"{scenario3.WIDE_MARGIN_POINTS:.0f} points on both, and more than the engines differ by; no interval, "
        "not a test of the report's rule)."
    )
    return text, rows


def _points(value: Optional[float]) -> str:
    return "-" if value is None else f"{value:.1f}"
