"""results/compare.py: `fastgen compare` over two sides' runs: each figure for A, B and B/A, and the configs it
leaves out."""

from __future__ import annotations

import json

import pytest
from _support.results import identity, scenario1_requests, table, write_repeat

from fastgen.results import compare_runs


def test_compare_runs_reports_each_figure_for_a_b_and_their_ratio(two_sides, tmp_path):
    comparison = compare_runs(*two_sides, tmp_path / "out", plots=False)
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert comparison.configs == ["scenario1/c2"] and report["problems"] == []
    (row,) = table(report, "runs", "Runs")
    assert row["hit % A"]["value"] == pytest.approx(60.0) and row["hit % B"]["value"] == pytest.approx(20.0)
    assert row["hit % A"]["n"] == 6 and row["hit % A"]["repeats"] == 1
    assert row["hit % B/A"]["value"] == pytest.approx(20.0 / 60.0)
    by_turn = {r["turn"]: r for r in table(report, "scenario1", "TTFT of text answers by turn")}
    assert by_turn[3]["TTFT p50 ms A"]["value"] == pytest.approx(50)
    assert by_turn[3]["TTFT p50 ms B"]["value"] == pytest.approx(150)
    assert by_turn[3]["TTFT p50 ms B/A"]["value"] == pytest.approx(3.0)
    # two sessions: too few to tell, no interval and no test
    assert by_turn[3]["TTFT p50 ms B/A"]["too_few"] == (
        "2 sessions on both sides, 8 needed; a time, and one run a side: 2 needed"
    )
    assert by_turn[3]["TTFT p50 ms A"]["too_few"] == "2 sessions, 8 needed; a time, and one run a side: 2 needed"
    assert by_turn[2]["kind"] == "tool_call" and by_turn[2]["TTFT p50 ms A"]["value"] is None
    markdown = (tmp_path / "out" / "report.md").read_text()
    assert "a turn answered with a tool call has no TTFT" in markdown
    assert "| scenario1/c2 | completed | 0 | 0 | completed |" in markdown
    assert "| 3 | text | 50.0 n=2 (2 sessions) | 150 n=2 (2 sessions) | 3.00 (too few) |" in markdown


def test_compare_names_and_leaves_out_configs_whose_runs_replayed_different_datasets(tmp_path):
    for name in ("c2", "c4"):
        write_repeat(tmp_path / "a" / "scenario1" / name, scenario1_requests(900))
    write_repeat(tmp_path / "b" / "scenario1" / "c2", scenario1_requests(900))
    write_repeat(
        tmp_path / "b" / "scenario1" / "c4", scenario1_requests(900), identity=identity(dataset_sha256="e" * 64)
    )
    comparison = compare_runs(tmp_path / "a", tmp_path / "b", tmp_path / "out", plots=False)
    assert comparison.configs == ["scenario1/c2"]
    assert (
        "scenario1/c4: its runs replayed different datasets (a: dddddddddddd; b: eeeeeeeeeeee); not compared: "
        "run both sides on one dataset"
    ) in comparison.problems
    assert any(p.startswith("b's runs replayed 2 datasets") for p in comparison.problems)
