"""The summary at the top: the rule every B/A of the report is decided by (inference.py) and how many it tested, the
differences it found in each config's headline figures (hit %, TTFT p50 and p95 of text answers, output tok/s), the
largest first, at most LINES of them; the configs and figures too few to tell; configs compared although one side's
prompts were the other's plus a constant (the Same prompts check), and those left out because their prompts differ.
The headline figures are one family of tests, the tables' other B/A another (Tests.decide); a headline figure shown in
a table carries the summary's decision."""

from __future__ import annotations

import math
from typing import Optional

from ..inference import ALPHA, MIN_RUNS, MIN_SESSIONS
from ..report import Pair, Section
from ..stats import HIT_MARGIN, MARGIN, Figure, Ratio, hit_ratio
from .common import TEXT_ANSWERS, TTFT, interval_text, number
from .prompts import prompt_check
from .steady import whole_output_tokens_per_s

SCENARIO = None  # every scenario
LINES = 5

HEADLINE = (
    ("hit %", hit_ratio()),
    (f"TTFT p50 ms ({TEXT_ANSWERS})", TTFT[50]),
    (f"TTFT p95 ms ({TEXT_ANSWERS})", TTFT[95]),
)
OUTPUT = "output tok/s"


def _runs(figure: Figure) -> str:
    return f"{figure.repeats} run{'s' if figure.repeats != 1 else ''}"


def _line(pair: Pair, name: str, label: str, a: Figure, b: Figure, r: Ratio) -> str:
    behind = f"n {b.n} and {a.n}" + (f", {r.sessions} sessions" if r.sessions else "")
    offset = f", {r.offset_free}" if r.offset_free else ""
    return (
        f"{name}: {label} {number(b.value)} on B ({pair.b.label}) against {number(a.value)} on A ({pair.a.label}), "
        f"B/A {r.value:.2f} {interval_text(r)} ({behind}; {_runs(b)} and {_runs(a)}{offset})"
    )


def headline(pair: Pair, name: str) -> list[tuple[str, tuple[Figure, Figure, Ratio]]]:
    """A config's headline figures, (label, (A, B, B/A)), in HEADLINE's order and output tok/s: the same tests as
    the tables that show them (Runs, Steady state, Throughput), declared the headline family."""
    cells = [(label, pair.triple(measure, [name], headline=True)) for label, measure in HEADLINE]
    cells.append((OUTPUT, pair.run_triple(name, whole_output_tokens_per_s, what=OUTPUT, headline=True)))
    return cells


def rule(pair: Pair) -> str:
    tests = pair.tests
    return (
        f"The rule: a B/A is a difference when its 95 % interval (over the sessions behind it, the same ones drawn on "
        f"both sides, and over the runs) lies beyond its margin ({HIT_MARGIN:.0%} for hit ratios, {MARGIN:.0%} "
        f"for the rest), after Benjamini-Hochberg at {ALPHA:.0%} over the headline figures below "
        f"({len(tests.tested(True))} tested, {len(tests.too_few(True))} too few to tell) and, apart, over the "
        f"tables' other B/A ({len(tests.tested(False))} tested, {len(tests.too_few(False))} too few). Too few: under "
        f"{MIN_SESSIONS} sessions; a time or a whole-run figure under {MIN_RUNS} runs a side. When A and B do not "
        f"differ, the summary claims a difference with probability at most {ALPHA:.0%}, the tables at most "
        f"{ALPHA:.0%} apart."
    )


def compared_configs(pair: Pair) -> list[str]:
    """The configs the summary (and the first page) speak of: both sides ran them and were sent the same prompts,
    or the same plus a constant."""
    return [name for name in sorted(set(pair.a.runs) & set(pair.b.runs)) if prompt_check(pair, name).compared]


def build(pair: Pair) -> Optional[Section]:
    names = sorted(set(pair.a.runs) & set(pair.b.runs))
    section = Section("summary", "Summary")
    section.findings.append(rule(pair))
    checks = {name: prompt_check(pair, name) for name in names}
    compared = compared_configs(pair)
    found: list[tuple] = []
    too_few: dict[str, dict[str, list[str]]] = {}  # why -> figure -> configs
    for name in compared:
        for label, (a, b, r) in headline(pair, name):
            if r.distinguishable and r.value:
                found.append((-abs(math.log(r.value)), name, label, a, b, r))
            elif r.too_few is not None:
                too_few.setdefault(r.too_few, {}).setdefault(label.split(" (")[0], []).append(name)
    found.sort(key=lambda f: f[:3])
    shown = found[:LINES]
    section.findings += [_line(pair, *f[1:]) for f in shown]
    claimed = _claimed(pair)
    if not found:
        section.findings.append(
            f"No difference between A ({pair.a.label}) and B ({pair.b.label}) in the headline figures of "
            f"{len(compared)} config{'s' if len(compared) != 1 else ''} (hit %, TTFT p50 and p95 of {TEXT_ANSWERS}, "
            f"output tok/s)" + (f"; {claimed} among the tables' other B/A (without ~)." if claimed else ".")
        )
    elif len(found) > len(shown) or claimed:
        more = len(found) - len(shown)
        parts = [f"{more} more headline difference{'' if more == 1 else 's'}"] if more else []
        if claimed:
            parts.append(f"{claimed} difference{'' if claimed == 1 else 's'} among the tables' other B/A (without ~)")
        section.findings.append("and " + ", and ".join(parts) + ".")
    if too_few:
        section.findings.append("Too few to tell (shown, not tested): " + "; ".join(_too_few(too_few)) + ".")
    offsets = [name for name in compared if checks[name].verdict == "offset"]
    if offsets:
        section.findings.append(_offsets(pair, offsets, checks))
    if len(compared) < len(names):
        section.findings.append(
            f"Left out: {', '.join(n for n in names if n not in compared)}, whose sides were not sent the same "
            f"prompts (see Same prompts)."
        )
    runs = sorted({len(run.repeats) for side in pair.sides for run in side.runs.values()})
    if runs == [1]:
        section.findings.append(
            "One run a side: times and rates are too few to tell, since a run's host and clocks move every request "
            "in it together and one run cannot tell that from the engine; hit ratios and token counts are tested "
            f"over their sessions. --repeat {MIN_RUNS} or more tests the times (3 gives the t test 4 degrees of "
            "freedom, 2 gives it 2)."
        )
    return section


def _claimed(pair: Pair) -> int:
    """How many of the tables' other B/A are differences (without `~`)."""
    return len((pair.tests.claimed or set()) - pair.tests.headline)


def _offsets(pair: Pair, names: list[str], checks: dict) -> str:
    parts = []
    for name in names:
        check = checks[name]
        side = pair.b.label if check.offset > 0 else pair.a.label
        lift = f", its hit % lifted {check.lift:.2f} points by them" if check.lift is not None else ""
        parts.append(f"{name} ({side}: {abs(check.offset):,} tokens more on each of {check.matched} requests{lift})")
    return (
        "Compared although one side's prompts were the other's plus a constant, request by request (Same "
        "prompts): " + "; ".join(parts) + "."
    )


def _too_few(found: dict[str, dict[str, list[str]]]) -> list[str]:
    """Per reason, the figures that share a list of configs: "TTFT p50 ms, TTFT p95 ms of scenario1/c10 (why)"."""
    parts = []
    for why, figures in sorted(found.items()):
        by_configs: dict[tuple[str, ...], list[str]] = {}
        for label, configs in figures.items():
            by_configs.setdefault(tuple(configs), []).append(label)
        parts += [f"{', '.join(labels)} of {', '.join(configs)} ({why})" for configs, labels in by_configs.items()]
    return parts
