"""results/sections/answers.py: the first page, one sentence per question of the benchmark, from the figures the tables
show; and the intervals every page prints only where they say something (inference.MIN_INTERVAL_RUNS)."""

from __future__ import annotations

import math
import random
import re
from pathlib import Path

from _support.results import report_of, request, rows, section, table, write_repeat

from fastgen.results import compare_runs, read_runs
from fastgen.results import render
from fastgen.results.report import Pair, Side
from fastgen.results.sections import SECTIONS, answers
from fastgen.results.sections.common import number

# each run's effect on every time in it: two runs 2.6 times apart, as two runs of a toy model on busy cores were
RUN_EFFECTS = (1.0, 2.6, 1.4)
STEADY_RUNS = (1.0, 1.1, 0.95)  # a quiet machine


def _requests(trace_dir: str, sessions: int, slow: float, rng: random.Random) -> list[dict]:
    """`sessions` sessions of three turns (a root and two branches for scenario 2): the first misses, the later
    ones hit 850 of 1,000 tokens on a stable layout (and scenario 1, 2), 400 on a noisy one."""
    kinds = ("root", "branch", "branch") if trace_dir.startswith("scenario2") else ("text", "text", "text")
    found = []
    for s in range(sessions):
        for turn, kind in enumerate(kinds, 1):
            cached = 0 if turn == 1 else (400 if trace_dir.endswith("noisy") else 850)
            ttft = slow * (0.05 + 0.1 * rng.random()) * (2 if cached == 0 else 1)
            found.append(
                request(
                    f"s{s}", turn, kind, start=s * 0.5 + turn, prompt=1000, cached=cached, ttft=ttft,
                    trace_dir=trace_dir, output=20 + s,
                )
            )  # fmt: skip
    return found


def bakeoff(root: Path, runs: int, effects: tuple[float, ...] = RUN_EFFECTS) -> tuple[Path, Path]:
    """Two sides' run folders of four configs, B's times three times A's, each run's times moved by its effect."""
    rng = random.Random(7)
    configs = (
        ("scenario1", "c4", "scenario1", 4),
        ("scenario2", "c10_sync", "scenario2_sync", 10),
        ("scenario3", "c100_stable", "scenario3_stable", 100),
        ("scenario3", "c100_noisy", "scenario3_noisy", 100),
    )
    for side, slow in (("a", 1.0), ("b", 3.0)):
        for k in range(1, runs + 1):
            for scenario, name, trace_dir, level in configs:
                requests = _requests(trace_dir, 10, slow * effects[k - 1], rng)
                write_repeat(root / side / scenario / name, requests, repeat=k, repeats=runs, concurrency=level)
    return root / "a", root / "b"


def _by(report: dict, id_: str, title: str, key: str) -> dict:
    return {row[key]: row for row in table(report, id_, title)}


def _said(row: dict, figure: str) -> str:
    """What a sentence must say of a figure the tables show: B's value, A's, and B/A."""
    a, b, r = row[f"{figure} A"], row[f"{figure} B"], row[f"{figure} B/A"]
    return f"{number(b['value'])}{{unit}} on B (b) against {number(a['value'])}{{unit}} on A (a), B/A {r['value']:.2f}"


def test_the_first_page_answers_each_question_with_the_numbers_the_tables_show(tmp_path):
    compare_runs(*bakeoff(tmp_path, 3, STEADY_RUNS), tmp_path / "out", plots=False)
    report = report_of(tmp_path / "out")
    findings = section(report, "answers")["findings"]
    assert [f.split("**")[1] for f in findings] == [
        "Does the engine reuse one agent's growing prefix?",
        "Does it reuse a forked context across parallel branches?",
        "Does it reuse a large prefix shared by many sessions?",
        "Does a stable prompt order beat a noisy one?",
        "Latency, the median turn:",
        "Latency, the slow turns:",
        "Throughput:",
    ]
    runs = _by(report, "runs", "Runs", "config")
    assert _said(runs["scenario1/c4"], "hit %").format(unit=" %") in findings[0]
    assert _said(runs["scenario2/c10_sync"], "hit %").format(unit=" %") in findings[1]
    assert "on scenario3/c100_noisy" in findings[2] or "on scenario3/c100_stable" in findings[2]
    assert findings[2].endswith("; 0 of 2 configs differ.")
    layouts = rows(next(t for t in section(report, "scenario3")["tables"] if t["title"].startswith("Stable")))
    gaps = [f"{row['gap (points)']:.1f}" for row in layouts]
    assert f"Stable beat noisy at c100 by {gaps[0]} points on A and {gaps[1]} on B: wide on both engines" in findings[3]
    # latency: B's TTFT three times A's in every run, a difference on every config; the lead is the farthest
    steady = {(r["config"], r["figure"]): r for r in table(report, "steady_state", "Whole run against steady state")}
    for finding, figure in ((findings[4], "TTFT p50 ms"), (findings[5], "TTFT p95 ms")):
        name = re.search(r"on (scenario\S+):", finding).group(1)
        row = {k.replace("whole", figure): v for k, v in steady[(name, figure)].items()}
        ratio = row[f"{figure} B/A"]
        assert _said(row, figure).format(unit=" ms") in finding
        assert f"[{ratio['low']:.2f}-{ratio['high']:.2f}]: a difference, B higher; 4 of 4 configs differ." in finding
        others = [steady[(n, figure)]["whole B/A"]["value"] for n in runs]
        assert abs(math.log(ratio["value"])) == max(abs(math.log(v)) for v in others)
    throughput = _by(report, "throughput", "Throughput", "config")
    name = re.search(r"on (scenario\S+):", findings[6]).group(1)
    assert _said(throughput[name], "output tok/s").format(unit=" tok/s") in findings[6]
    # the figures behind each sentence are in report.json; report.md prints the sentences first, then the rest
    (data,) = section(report, "answers")["tables"]
    assert len(data["rows"]) == 7 and data["rows"][4][5]["distinguishable"] is True
    markdown = (tmp_path / "out" / "report.md").read_text()
    first = markdown.index("## What this report answers")
    assert first < markdown.index("Every figure is given") < markdown.index("## Summary")
    assert "- " + findings[4] in markdown and data["title"] not in markdown


def _intervals(markdown: str) -> list[tuple[float, float]]:
    found = re.findall(r"\[(-?[\d,.]+)-([\d,.]+)\]", markdown)
    return [(float(low.replace(",", "")), float(high.replace(",", ""))) for low, high in found]


def test_with_two_runs_a_side_no_interval_spans_orders_of_magnitude_and_three_runs_show_them(tmp_path):
    compare_runs(*bakeoff(tmp_path / "two", 2), tmp_path / "out2", plots=False)
    markdown = (tmp_path / "out2" / "report.md").read_text()
    shown = _intervals(markdown)
    assert shown and all(high <= 10 * low for low, high in shown), max(shown, key=lambda s: s[1] / max(s[0], 1e-9))
    level = _by(report_of(tmp_path / "out2"), "scenario1", "TTFT of text answers by concurrency", "config")
    p95 = level["scenario1/c4"]["TTFT p95 ms A"]
    # the range is kept in report.json, flagged: two runs 2.6 times apart put it over orders of magnitude
    assert (p95["informative"], p95["needs_runs"], p95["repeats"]) == (False, 3, 2)
    assert p95["high"] / p95["low"] > 100
    assert f"| {number(p95['value'])} [needs 3 runs] n=60 (10 sessions, 2 runs) |" in markdown
    latency = section(report_of(tmp_path / "out2"), "answers")["findings"][4]
    assert "[needs 3 runs a side]" in latency or ": a difference" in latency

    compare_runs(*bakeoff(tmp_path / "three", 3), tmp_path / "out3", plots=False)
    level = _by(report_of(tmp_path / "out3"), "scenario1", "TTFT of text answers by concurrency", "config")
    p95 = level["scenario1/c4"]["TTFT p95 ms A"]
    assert (p95["informative"], p95["needs_runs"]) == (True, None)
    shown = f"| {number(p95['value'])} [{number(p95['low'])}-{number(p95['high'])}] n=90 (10 sessions, 3 runs) |"
    assert shown in (tmp_path / "out3" / "report.md").read_text()


def test_the_first_page_computes_nothing_again(tmp_path):
    sides = bakeoff(tmp_path, 2)
    pair = Pair(*(Side(path.name, read_runs(path)[0]) for path in sides))
    for module in SECTIONS:
        if module is not answers:
            module.build(pair)
    tests, memo = dict(pair.tests.found), set(pair.tests._memo)
    first = answers.build(pair)
    assert first is not None and len(first.findings) == 7
    assert pair.tests.found == tests and set(pair.tests._memo) == memo  # the same figures, looked up


def test_a_verdict_in_words_is_the_rules():
    from fastgen.results.stats import Ratio

    assert answers.verdict(Ratio(0.5, 0.4, 0.6, distinguishable=True, p=0.001)) == "a difference, B lower"
    # beyond its margin alone, not once the report's tests are corrected
    beyond = answers.verdict(Ratio(2.9, 1.2, 6.9, distinguishable=False, p=0.02))
    assert beyond == "not a difference once the report's many tests are corrected (Summary)"
    assert (
        answers.verdict(Ratio(1.0, 0.9, 1.1, distinguishable=False, p=0.9)) == "not a difference by the report's rule"
    )
    assert answers.verdict(Ratio(1.0, too_few="2 sessions, 8 needed")) == "too few to tell (2 sessions, 8 needed)"
    # tested, but on an interval its two runs a side cannot hold up: a B/A of 3 is not "the same"
    unheld = Ratio(3.1, 0.01, 900.0, distinguishable=False, p=0.4, informative=False, needs_runs=3)
    assert answers.verdict(unheld) == "too few runs to tell either way"
    assert render._cell("TTFT p50 ms B/A", unheld) == "3.10 (too few runs)"  # the table's mark says the same
    assert render._cell("TTFT p50 ms B/A", Ratio(1.0, 0.9, 1.1, distinguishable=False, p=0.9)) == "1.00 ~"
    assert answers.verdict(Ratio(None, left_out="incomplete")) == "not compared (incomplete run)"


def test_a_question_no_config_answers_says_so(tmp_path):
    for side in ("a", "b"):
        write_repeat(tmp_path / side / "scenario1" / "c4", _requests("scenario1", 10, 1.0, random.Random(1)))
    compare_runs(tmp_path / "a", tmp_path / "b", tmp_path / "out", plots=False)
    first = section(report_of(tmp_path / "out"), "answers")
    assert first["findings"][1] == (
        "**Does it reuse a forked context across parallel branches?** Not answered: no config of it ran on both sides."
    )
    assert first["findings"][3].endswith(
        "Not answered: no load level ran both a stable and a noisy config on both sides."
    )
    # one run a side: times are too few to tell, and the sentence says why
    assert "too few to tell (a time, and one run a side: 2 needed)" in first["findings"][4]
    assert all(len(row) == len(first["tables"][0]["columns"]) for row in first["tables"][0]["rows"])
