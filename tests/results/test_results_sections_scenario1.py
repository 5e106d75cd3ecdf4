"""results/sections/scenario1.py: TTFT by turn and by concurrency, over repeats, p99 only with enough requests, and
output tokens per turn kind."""

from __future__ import annotations

import math
import statistics

import pytest
from _support.results import report_of, swarm_requests, table, write_repeat

from fastgen.results import compare_runs


def test_compare_over_repeats_reports_the_mean_and_its_interval_over_runs(tmp_path):
    for k, ttft in enumerate((100, 300, 200), start=1):
        write_repeat(tmp_path / "a" / "scenario1" / "c2", swarm_requests([ttft] * 8), repeat=k, repeats=3)
    write_repeat(tmp_path / "b" / "scenario1" / "c2", swarm_requests([100] * 8))
    compare_runs(tmp_path / "a", tmp_path / "b", tmp_path / "out", plots=False)
    (level,) = table(report_of(tmp_path / "out"), "scenario1", "TTFT of text answers by concurrency")
    # every session the same within a run: the interval is the runs' alone, 200 x exp(+- 4.303 sd(log) / sqrt(3))
    a = level["TTFT p50 ms A"]
    assert (a["value"], a["n"], a["repeats"], a["sessions"]) == (200.0, 24, 3, 8)
    half = 4.3027 * statistics.stdev([math.log(v) for v in (100, 300, 200)]) / 3**0.5
    assert a["low"] == pytest.approx(200 * math.exp(-half), rel=1e-3)
    assert a["high"] == pytest.approx(200 * math.exp(half), rel=1e-3)
    assert "200 [50.3-795] n=24 (8 sessions, 3 runs)" in (tmp_path / "out" / "report.md").read_text()


def test_compare_shows_p99_only_with_100_requests_behind_it(tmp_path):
    for side in ("a", "b"):
        write_repeat(tmp_path / side / "scenario1" / "c2", swarm_requests([100 + i for i in range(99)]))
        write_repeat(tmp_path / side / "scenario1" / "c4", swarm_requests([100 + i for i in range(100)]), concurrency=4)
    compare_runs(tmp_path / "a", tmp_path / "b", tmp_path / "out", plots=False)
    levels = {
        r["config"]: r for r in table(report_of(tmp_path / "out"), "scenario1", "TTFT of text answers by concurrency")
    }
    few = levels["scenario1/c2"]["TTFT p99 ms A"]
    assert few["value"] is None and few["n"] == 99
    assert levels["scenario1/c4"]["TTFT p99 ms A"]["value"] == pytest.approx(100 + 0.99 * 99)
    markdown = (tmp_path / "out" / "report.md").read_text()
    assert "- (n=99, 99 sessions)" in markdown and "p95: 20, p99: 100" in markdown


def test_compare_shows_output_tokens_per_turn_kind_beside_the_latencies(two_sides, tmp_path):
    compare_runs(*two_sides, tmp_path / "out", plots=False)
    kinds = {r["kind"]: r for r in table(report_of(tmp_path / "out"), "scenario1", "Output tokens per request")}
    assert kinds["tool_call"]["output tokens A"]["value"] == 10 and kinds["text"]["output tokens B"]["n"] == 4
