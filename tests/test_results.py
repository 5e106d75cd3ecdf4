"""fastgen.results on run folders built here, request by request, so every figure has a hand-computed answer."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fastgen.bakeoff.runs import write_run
from fastgen.results import compare_runs, read_runs
from fastgen.results.sections.scenario2 import roles
from fastgen.results.stats import hit_percent, percentile


def request(session, turn, kind, *, start, prompt, cached, ttft=0.1, trace_dir="scenario1", output=10,
            latency=0.5, details=True, error=None):
    usage = {"prompt_tokens": prompt, "completion_tokens": output,
             "prompt_tokens_details": {"cached_tokens": cached} if details else None}
    return {"start_time": start, "end_time": start + latency,
            "info": {"labels": {"session": session, "trace_dir": trace_dir, "turn": str(turn), "turn_kind": kind},
                     "response_metrics": {"output_tokens": output, "server_usage": usage}},
            "computed_metrics": None if error else {
                "request_latency": latency, "time_to_first_token": ttft if kind != "tool_call" else None,
                "normalized_time_per_output_token": latency / output, "time_per_output_token": None,
                "output_tokens": output},
            "error": error}


def write_folder(folder: Path, requests: list[dict], *, concurrency=2, engine="vllm", status="completed",
                 samples=(), sessions=None):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "per_request_lifecycle_metrics.json").write_text(json.dumps(requests))
    ids = sorted({r["info"]["labels"]["session"] for r in requests})
    sessions = sessions if sessions is not None else [
        {"session_id": s, "success": True, "start_time": 1000.0, "end_time": 1036.0} for s in ids]
    (folder / "per_session_lifecycle_metrics.json").write_text(json.dumps(sessions))
    (folder / "run-config.yml").write_text(f"load:\n  stages:\n  - concurrent_sessions: {concurrency}\n    "
                                           f"num_sessions: {len(ids)}\n")
    (folder / "metrics.jsonl").write_text("".join(json.dumps({"t": 1000.0 + i, "metrics": m}) + "\n"
                                                  for i, m in enumerate(samples)))
    write_run(folder, {"status": status, "engine": engine, "seconds": 36.0})


def scenario1_requests(cached_later: int) -> list[dict]:
    """Two sessions of three turns: turn 1 misses, later turns have `cached_later` of 1000 prompt tokens cached."""
    out = []
    for s, session in enumerate(("s1", "s2")):
        out.append(request(session, 1, "text", start=s, prompt=1000, cached=0, ttft=0.2, details=False))
        out.append(request(session, 2, "tool_call", start=s + 1, prompt=1000, cached=cached_later, latency=0.4))
        out.append(request(session, 3, "text", start=s + 2, prompt=1000, cached=cached_later,
                           ttft=0.05 if cached_later > 500 else 0.15))
    return out


@pytest.fixture()
def two_sides(tmp_path):
    write_folder(tmp_path / "a" / "scenario1" / "c2", scenario1_requests(900),
                 samples=[{"vllm:kv_cache_usage_perc": 0.25}, {"vllm:kv_cache_usage_perc": 0.5}])
    write_folder(tmp_path / "b" / "scenario1" / "c2", scenario1_requests(300), engine="sglang",
                 samples=[{"sglang:token_usage": 0.9}])
    return tmp_path / "a", tmp_path / "b"


def test_read_runs_takes_labels_usage_and_timings_from_the_per_request_records(two_sides):
    runs, problems = read_runs(two_sides[0])
    assert problems == [] and list(runs) == ["scenario1/c2"]
    run = runs["scenario1/c2"]
    assert (run.status, run.engine, run.concurrency, len(run.requests), len(run.sessions)) == ("completed", "vllm",
                                                                                              2, 6, 2)
    first = run.requests[0]
    # vLLM and SGLang send no prompt_tokens_details when nothing was cached: that is 0 cached, not unknown
    assert (first.session, first.turn, first.kind, first.prompt_tokens, first.cached_tokens) == ("s1", 1, "text",
                                                                                                  1000, 0)
    assert [r.ttft for r in run.requests if r.kind == "tool_call"] == [None, None]


def test_hit_percent_pools_cached_over_prompt_tokens(two_sides):
    runs, _ = read_runs(two_sides[0])
    # 4 of 6 requests have 900 of 1000 cached
    assert hit_percent(runs["scenario1/c2"].requests) == pytest.approx(100 * 3600 / 6000)


def test_percentile_interpolates_linearly():
    assert percentile([10, 20, 30, 40], 50) == 25
    assert percentile([], 50) is None


def test_compare_runs_reports_each_figure_for_a_b_and_their_ratio(two_sides, tmp_path):
    comparison = compare_runs(*two_sides, tmp_path / "out", plots=False)
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert comparison.configs == ["scenario1/c2"] and report["problems"] == []
    runs = next(s for s in report["sections"] if s["id"] == "runs")["tables"][0]
    row = dict(zip(runs["columns"], runs["rows"][0]))
    assert row["hit % A"] == pytest.approx(60.0) and row["hit % B"] == pytest.approx(20.0)
    assert row["hit % B/A"] == pytest.approx(20.0 / 60.0)
    scenario1 = next(s for s in report["sections"] if s["id"] == "scenario1")
    by_turn = {row[0]: dict(zip(scenario1["tables"][0]["columns"], row)) for row in scenario1["tables"][0]["rows"]}
    assert by_turn[3]["TTFT p50 ms A"] == pytest.approx(50) and by_turn[3]["TTFT p50 ms B"] == pytest.approx(150)
    assert by_turn[3]["TTFT p50 ms B/A"] == pytest.approx(3.0)
    assert by_turn[2]["kind"] == "tool_call" and by_turn[2]["TTFT p50 ms A"] is None
    markdown = (tmp_path / "out" / "report.md").read_text()
    assert "Tool-call turns have no TTFT" in markdown and "| scenario1/c2 | completed | completed |" in markdown


def test_compare_runs_names_a_malformed_or_missing_file_and_compares_the_rest(two_sides, tmp_path):
    a, b = two_sides
    write_folder(a / "scenario1" / "c4", scenario1_requests(900), concurrency=4)
    write_folder(b / "scenario1" / "c4", scenario1_requests(300), concurrency=4)
    (b / "scenario1" / "c4" / "per_request_lifecycle_metrics.json").write_text("[{truncated")
    (a / "scenario1" / "c2" / "metrics.jsonl").unlink()
    comparison = compare_runs(a, b, tmp_path / "out", plots=False)
    problems = "\n".join(comparison.problems)
    assert "c4/per_request_lifecycle_metrics.json is not readable JSON" in problems
    assert "c2/metrics.jsonl is missing" in problems
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["problems"] == comparison.problems
    assert "scenario1/c2" in comparison.configs  # the readable config is still compared


def test_compare_runs_without_runs_raises_output_error(tmp_path):
    from fastgen.errors import OutputError

    (tmp_path / "empty").mkdir()
    with pytest.raises(OutputError, match="holds no runs"):
        compare_runs(tmp_path / "empty", tmp_path / "empty", tmp_path / "out")


def test_scenario2_roles_take_the_branch_that_started_first_not_branch_one():
    from fastgen.results.runs import _request

    entries = [request("x", 0, "root", start=0, prompt=100, cached=0, trace_dir="scenario2_sync"),
               request("x", 1, "branch", start=5, prompt=120, cached=96, trace_dir="scenario2_sync"),
               request("x", 2, "branch", start=2, prompt=120, cached=96, trace_dir="scenario2_sync"),
               request("x", 3, "branch", start=7, prompt=120, cached=96, trace_dir="scenario2_sync")]
    found = roles([_request(e) for e in entries])
    assert [r.turn for r in found["root"]] == [0]
    assert [r.turn for r in found["first"]] == [2]
    assert sorted(r.turn for r in found["later"]) == [1, 3]


def test_scenario3_verdict_says_canonicalization_matters_when_stable_wins_widely_on_both(tmp_path):
    def swarm(hit_stable, hit_noisy):
        out = {}
        for layout, hit in (("stable", hit_stable), ("noisy", hit_noisy)):
            out[layout] = [request(f"{layout}-{i}", 1, "text", start=i, prompt=1000, cached=hit * 10,
                                   trace_dir=f"scenario3_{layout}") for i in range(4)]
        return out

    for side, (stable, noisy) in (("a", (90, 40)), ("b", (85, 35))):
        for layout, requests in swarm(stable, noisy).items():
            write_folder(tmp_path / side / "scenario3" / f"c100_{layout}", requests, concurrency=100)
    compare_runs(tmp_path / "a", tmp_path / "b", tmp_path / "out", plots=False)
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    scenario3 = next(s for s in report["sections"] if s["id"] == "scenario3")
    (finding,) = scenario3["findings"]
    assert "by 50.0 points on a and 50.0 on b" in finding
    assert finding.endswith("prompt canonicalization matters more than the engine.")


def test_compare_runs_plots_are_pngs_when_matplotlib_is_installed(two_sides, tmp_path):
    pytest.importorskip("matplotlib")
    comparison = compare_runs(*two_sides, tmp_path / "out")
    assert comparison.plots and comparison.plots_skipped is None
    for name in comparison.plots.values():
        assert (tmp_path / "out" / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert f"]({comparison.plots['scenario1_hit_by_turn']})" in (tmp_path / "out" / "report.md").read_text()


def test_compare_with_an_analysis_sets_the_pooled_ceiling_beside_each_hit_ratio(two_sides, tmp_path):
    analysis = tmp_path / "analysis.json"
    by_turn = {"1": {"prompt_tokens": 2000, "hit_percent_infinite": 10.0, "hit_percent_capacity": 5.0},
               "2": {"prompt_tokens": 2000, "hit_percent_infinite": 90.0, "hit_percent_capacity": 80.0},
               "3": {"prompt_tokens": 2000, "hit_percent_infinite": 95.0, "hit_percent_capacity": 50.0}}
    analysis.write_text(json.dumps({"format": 1, "definition": "vllm", "capacity_tokens": 4096, "configs": [
        {"config": "scenario1/c2", "prompt_tokens": 6000, "hit_percent_infinite": 65.0, "hit_percent_capacity": 45.0,
         "by_turn": by_turn}]}))
    compare_runs(*two_sides, tmp_path / "out", plots=False, analysis=analysis)
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    runs = next(s for s in report["sections"] if s["id"] == "runs")["tables"][0]
    row = dict(zip(runs["columns"], runs["rows"][0]))
    assert (row["ceiling % (analyze, infinite)"], row["ceiling % at capacity"]) == (65.0, 45.0)
    hits = next(s for s in report["sections"] if s["id"] == "scenario1")["tables"][1]
    turn3 = dict(zip(hits["columns"], hits["rows"][2]))
    assert turn3["ceiling % (analyze, infinite)"] == pytest.approx(95.0)


def test_compare_with_an_unreadable_analysis_names_it_and_reports_without_ceilings(two_sides, tmp_path):
    bad = tmp_path / "analysis.json"
    bad.write_text("{")
    comparison = compare_runs(*two_sides, tmp_path / "out", plots=False, analysis=bad)
    assert any(p.startswith(f"--analysis {bad} is not the JSON of fastgen analyze --json") for p in comparison.problems)
    runs = next(s for s in json.loads((tmp_path / "out" / "report.json").read_text())["sections"]
                if s["id"] == "runs")["tables"][0]
    assert not any(c.startswith("ceiling") for c in runs["columns"])
