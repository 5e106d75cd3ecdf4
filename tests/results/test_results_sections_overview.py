"""results/sections/overview.py: every config's status, failed counts and pooled hit ratio, its B/A with or without
incomplete runs, and a hit above its ceiling explained."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import pytest
from _support.results import report_of, request, scenario1_requests, section, table, with_offset, write_repeat

from fastgen.results import compare_runs


@pytest.fixture()
def one_side_incomplete(tmp_path):
    write_repeat(tmp_path / "a" / "scenario1" / "c2", scenario1_requests(900))
    failing = scenario1_requests(300)
    failing[5]["error"], failing[5]["computed_metrics"] = {"error_type": "HTTPError", "error_msg": "500"}, None
    write_repeat(
        tmp_path / "b" / "scenario1" / "c2",
        failing,
        status="incomplete",
        counts={"sessions": {"total": 2, "failed": 1}},
    )
    return tmp_path / "a", tmp_path / "b"


def test_compare_shows_status_and_failed_counts_and_leaves_an_incomplete_run_out_of_b_over_a(
    one_side_incomplete, tmp_path
):
    compare_runs(*one_side_incomplete, tmp_path / "out", plots=False)
    report = report_of(tmp_path / "out")
    (row,) = table(report, "runs", "Runs")
    assert (row["status B"], row["failed requests B"], row["failed sessions B"]) == ("incomplete", 1, 1)
    assert row["hit % B"]["value"] == pytest.approx(18.0)  # shown: 900 of the 5,000 prompt tokens that succeeded
    assert row["hit % B/A"] == {
        "value": None,
        "low": None,
        "high": None,
        "distinguishable": None,
        "left_out": "incomplete",
        "too_few": None,
        "p": None,
        "margin": None,
        "sessions": 0,
        "offset_free": None,
        "df": None,
        "informative": None,
        "needs_runs": None,
    }
    (level,) = table(report, "scenario1", "TTFT of text answers by concurrency")
    assert level["status"] == "B incomplete (1/6 requests, 1/2 sessions failed)"
    assert level["TTFT p50 ms B"]["value"] is not None and level["TTFT p50 ms B/A"]["value"] is None
    assert "excl. (incomplete)" in (tmp_path / "out" / "report.md").read_text()


def test_compare_include_incomplete_puts_the_incomplete_run_into_b_over_a(one_side_incomplete, tmp_path):
    from fastgen.results import CompareOptions

    compare_runs(*one_side_incomplete, tmp_path / "out", plots=False, options=CompareOptions(include_incomplete=True))
    (row,) = table(report_of(tmp_path / "out"), "runs", "Runs")
    assert row["hit % B/A"]["value"] == pytest.approx(18.0 / 60.0) and row["hit % B/A"]["left_out"] is None


def test_compare_hit_ratio_of_prompts_of_unequal_length_is_pooled(tmp_path):
    for side in ("a", "b"):
        write_repeat(
            tmp_path / side / "scenario1" / "c2",
            [
                request("s1", 1, "text", start=0, prompt=100, cached=100),
                request("s2", 1, "text", start=1, prompt=900, cached=0),
            ],
        )
    compare_runs(tmp_path / "a", tmp_path / "b", tmp_path / "out", plots=False)
    (row,) = table(report_of(tmp_path / "out"), "runs", "Runs")
    assert row["hit % A"]["value"] == pytest.approx(10.0)  # 100 of 1000 tokens, not the mean of 100 % and 0 %


def analysis_file(path: Path, capacity: int, hit: float, capacity_band: Optional[list[float]] = None) -> Path:
    entry = {
        "config": "scenario1/c2",
        "requests": 6,
        "prompt_tokens": 6000,
        "hit_percent_infinite": hit,
        "hit_percent_capacity": hit - 10,
        "by_turn": {},
    }
    if capacity_band is not None:
        entry["hit_percent_capacity_band"] = capacity_band
    path.write_text(
        json.dumps(
            {
                "format": 1,
                "definition": "vllm",
                "block_size": 16,
                "capacity_tokens": capacity,
                "rules": "vllm: blocks of 16 tokens",
                "configs": [entry],
            }
        )
    )
    return path


def test_a_hit_above_its_ceiling_inside_the_analysis_band_is_put_down_to_the_interleaving(two_sides, tmp_path):
    compare_runs(
        *two_sides,
        tmp_path / "out",
        plots=False,
        analysis_a=analysis_file(tmp_path / "a.json", 1_000_000, 75.0),
        analysis_b=analysis_file(tmp_path / "b.json", 4096, 25.0, capacity_band=[12.0, 21.0]),
    )
    report = report_of(tmp_path / "out")
    # the band sits beside the point in the Runs table, for the side whose analysis has one
    (row,) = table(report, "runs", "Runs")
    assert row["ceiling B band % cap"] == "12.0-21.0" and "ceiling A band % cap" not in row
    (finding,) = section(report, "runs")["findings"]
    assert finding == (
        "scenario1/c2: b hits 20.0 %, 5.0 points above the ceiling at capacity, 15.0 %: inside the band 12.0-21.0 % "
        "analyze gives for other interleavings of the concurrent requests (the ceiling is one of them; its prompts "
        "were analyze's own, token for token)."
    )


def test_compare_ceilings_per_side_are_labelled_and_a_hit_above_its_ceiling_says_why(two_sides, tmp_path):
    compare_runs(
        *two_sides,
        tmp_path / "out",
        plots=False,
        analysis_a=analysis_file(tmp_path / "a.json", 1_000_000, 75.0),
        analysis_b=analysis_file(tmp_path / "b.json", 4096, 25.0),
    )
    report = report_of(tmp_path / "out")
    (row,) = table(report, "runs", "Runs")
    assert (row["ceiling A % inf"], row["ceiling A % cap"], row["ceiling B % cap"]) == (75.0, 65.0, 15.0)
    assert not [column for column in row if "band" in column]  # analyses without bands (older, or --band 0)
    assert report["b"]["ceilings"] == "b.json: KV capacity 4,096 tokens, block size 16, rules vllm: blocks of 16 tokens"
    # B hits 20 % against its own ceiling at capacity of 15 %; outputs not recorded in these runs
    (finding,) = section(report, "runs")["findings"]
    assert finding.startswith(
        "scenario1/c2: b hits 20.0 %, 5.0 points above the ceiling at capacity, 15.0 %: "
        "either its live outputs were shorter"
    )
    assert finding.endswith("(the outputs mode was not recorded; its prompts were analyze's own, token for token).")


def test_a_hit_above_its_ceiling_is_explained_by_how_the_prompts_compare_with_analyzes(tmp_path):
    """Recorded outputs, B's prompts analyze's plus 48 tokens each: where those tokens' lift is the whole excess the
    note says so; where it is not, it says the offset and the sharing, never that the prompts were analyze's own."""
    write_repeat(tmp_path / "a" / "scenario1" / "c2", scenario1_requests(900))
    write_repeat(tmp_path / "b" / "scenario1" / "c2", with_offset(scenario1_requests(900), 48))
    for ceiling, expected in (
        (
            70.0,
            "its prompts were analyze's plus 48 tokens on every request, which lift its hit % by 0.31 points: "
            "the offset's tokens, cached in every later request, are the whole excess.",
        ),
        (
            65.0,
            "its outputs were the recorded ones and its prompts were analyze's plus 48 tokens on every request, "
            "which lift its hit % by 0.31 points, so its requests interleaved otherwise than in the point's replay "
            "(the analysis JSON's band says how far the interleaving moves the hit).",
        ),
    ):
        out = tmp_path / f"out-{ceiling:g}"
        compare_runs(
            tmp_path / "a",
            tmp_path / "b",
            out,
            plots=False,
            analysis_a=analysis_file(tmp_path / "a.json", 1_000_000, 70.0),
            analysis_b=analysis_file(tmp_path / "b.json", 100_000, ceiling),  # at capacity: ceiling - 10
        )
        findings = [f for f in section(report_of(out), "runs")["findings"] if f.startswith("scenario1/c2: b")]
        assert len(findings) == 1 and findings[0].endswith(expected), findings
