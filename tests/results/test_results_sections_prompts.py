"""results/sections/prompts.py: were both sides sent the same prompts, a constant offset explained and its lift shown."""

from __future__ import annotations

import pytest
from _support.results import identity, report_of, scenario1_requests, section, table, with_offset, write_repeat

from fastgen.results import compare_runs


def test_compare_prompt_token_check_fails_when_the_sides_sent_different_prompts(tmp_path):
    longer = scenario1_requests(900)
    longer[0]["info"]["response_metrics"]["server_usage"]["prompt_tokens"] = 1060  # 1 % more over 6,000 tokens
    write_repeat(tmp_path / "a" / "scenario1" / "c2", scenario1_requests(900))
    write_repeat(tmp_path / "b" / "scenario1" / "c2", longer)
    comparison = compare_runs(tmp_path / "a", tmp_path / "b", tmp_path / "out", plots=False)
    report = report_of(tmp_path / "out")
    (row,) = table(report, "prompts", "Prompt tokens sent")
    assert (row["outputs"], row["requests matched"], row["same prompts"]) == ("recorded", 6, "NO")
    assert (row["prompt tokens A"]["value"], row["prompt tokens B"]["value"]) == (6000, 6060)
    assert (
        "scenario1/c2: b sent 1.010 x the prompt tokens of a (recorded outputs), not one constant amount more or "
        "less on every request: the engines were not given the same prompts"
    ) in comparison.problems
    assert any(
        f.startswith("Left out: scenario1/c2, whose sides were not sent")
        for f in section(report, "summary")["findings"]
    )


def test_compare_a_constant_prompt_offset_is_explained_compared_and_its_hit_lift_shown(tmp_path):
    write_repeat(tmp_path / "a" / "scenario1" / "c2", scenario1_requests(900))
    write_repeat(tmp_path / "b" / "scenario1" / "c2", with_offset(scenario1_requests(900), 48))
    comparison = compare_runs(tmp_path / "a", tmp_path / "b", tmp_path / "out", plots=False)
    report = report_of(tmp_path / "out")
    (row,) = table(report, "prompts", "Prompt tokens sent")
    assert row["same prompts"] == "yes, +48 tokens a request" and row["offset B-A (tokens a request)"] == 48
    # B: 3,792 of 6,288 tokens cached; without the offset 3,600 of 6,000, A's 60 %
    assert row["hit lift of the offset (points)"] == pytest.approx(100 * 3792 / 6288 - 60.0, abs=1e-6)
    assert not any("same prompts" in p for p in comparison.problems)
    # the hit ratios shown are the servers'; their B/A is tested without B's offset: 60 % against 60 %
    (runs,) = table(report, "runs", "Runs")
    assert runs["hit % B"]["value"] == pytest.approx(100 * 3792 / 6288)
    assert runs["hit % B/A"]["value"] == pytest.approx(1.0)
    assert runs["hit % B/A"]["offset_free"] == "b's 48-token prompt offset taken out"
    summary = section(report, "summary")["findings"]
    assert not any(f.startswith("Left out") for f in summary)
    assert any(
        "scenario1/c2 (b: 48 tokens more on each of 6 requests, its hit % lifted 0.31 points" in f for f in summary
    )


def test_compare_prompt_token_check_allows_live_outputs_their_tolerance(tmp_path):
    longer = scenario1_requests(900)
    longer[0]["info"]["response_metrics"]["server_usage"]["prompt_tokens"] = 1060
    write_repeat(tmp_path / "a" / "scenario1" / "c2", scenario1_requests(900), identity=identity(outputs="live"))
    write_repeat(tmp_path / "b" / "scenario1" / "c2", longer, identity=identity(outputs="live"))
    comparison = compare_runs(tmp_path / "a", tmp_path / "b", tmp_path / "out", plots=False)
    (row,) = table(report_of(tmp_path / "out"), "prompts", "Prompt tokens sent")
    assert row["same prompts"] == "yes" and not any("same prompts" in p for p in comparison.problems)
