"""fastgen.results on run folders built here, request by request, so every figure has a hand-computed answer."""

from __future__ import annotations

import json
import math
import statistics
import sys
from pathlib import Path
from typing import Optional

import pytest

from fastgen.formats.run_record import RunRecord, write_run
from fastgen.results import compare_runs, read_runs
from fastgen.results.sections.scenario2 import roles
from fastgen.results.report import Pair, Side
from fastgen.results.stats import hit_percent, hit_ratio, percentile


def request(
    session,
    turn,
    kind,
    *,
    start,
    prompt,
    cached,
    ttft=0.1,
    trace_dir="scenario1",
    output=10,
    latency=0.5,
    details=True,
    error=None,
):
    usage = {
        "prompt_tokens": prompt,
        "completion_tokens": output,
        "prompt_tokens_details": {"cached_tokens": cached} if details else None,
    }
    return {
        "start_time": start,
        "end_time": start + latency,
        "info": {
            "labels": {"session": session, "trace_dir": trace_dir, "turn": str(turn), "turn_kind": kind},
            "response_metrics": {"output_tokens": output, "server_usage": usage},
        },
        "computed_metrics": None
        if error
        else {
            "request_latency": latency,
            "time_to_first_token": ttft if kind != "tool_call" else None,
            "normalized_time_per_output_token": latency / output,
            "time_per_output_token": None,
            "output_tokens": output,
        },
        "error": error,
    }


def write_folder(
    folder: Path, requests: list[dict], *, concurrency=2, engine="vllm", status="completed", samples=(), sessions=None
):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "per_request_lifecycle_metrics.json").write_text(json.dumps(requests))
    ids = sorted({r["info"]["labels"]["session"] for r in requests})
    sessions = (
        sessions
        if sessions is not None
        else [{"session_id": s, "success": True, "start_time": 1000.0, "end_time": 1036.0} for s in ids]
    )
    (folder / "per_session_lifecycle_metrics.json").write_text(json.dumps(sessions))
    (folder / "run-config.yml").write_text(
        f"load:\n  stages:\n  - concurrent_sessions: {concurrency}\n    num_sessions: {len(ids)}\n"
    )
    (folder / "metrics.jsonl").write_text(
        "".join(json.dumps({"t": 1000.0 + i, "metrics": m}) + "\n" for i, m in enumerate(samples))
    )
    write_run(folder, RunRecord(status=status, engine=engine, seconds=36.0))


def write_repeat(
    config: Path,
    requests: list[dict],
    *,
    repeat=1,
    repeats=1,
    status="completed",
    identity=None,
    counts=None,
    sessions=None,
    concurrency=2,
    samples=(),
    reset=None,
):
    """A repeat-K folder as fastgen bakeoff writes it: run.json format 2 (the run folder contract)."""
    folder = config / f"repeat-{repeat}"
    write_folder(folder, requests, concurrency=concurrency, samples=samples, sessions=sessions)
    ids = sorted({r["info"]["labels"]["session"] for r in requests})
    failed = sum(r["error"] is not None for r in requests)
    record = {
        "format": 2,
        "config": f"{config.parent.name}/{config.name}",
        "repeat": repeat,
        "repeats": repeats,
        "status": status,
        "reason": None if status == "completed" else "1 of 6 requests failed",
        "seconds": 36.0,
        "requests": {"expected": len(requests), "recorded": len(requests), "failed": failed},
        "sessions": {"total": len(ids), "failed": 0},
        "identity": identity or IDENTITY,
        "reset": reset or {"done": "POST /reset_prefix_cache", "verified": True, "how": "probe: 0 cached"},
    }
    if counts:
        record.update(counts)
    (folder / "run.json").write_text(json.dumps(record))
    return folder


IDENTITY = {
    "server": {
        "url": "http://a:8000",
        "engine": "vllm",
        "version": "0.11.0",
        "model": "m",
        "kv_capacity_tokens": 100_000,
        "block_size": 16,
        "gpus": None,
        "process_start": 1.0,
    },
    "dataset_sha256": "d" * 64,
    "config_sha256": "c" * 64,
    "outputs": "recorded",
    "tool_call_max_tokens": "recorded",
}


def identity(**changes) -> dict:
    server = {**IDENTITY["server"], **changes.pop("server", {})}
    return {**IDENTITY, **changes, "server": server}


def section(report: dict, id_: str) -> dict:
    return next(s for s in report["sections"] if s["id"] == id_)


def rows(table: dict) -> list[dict]:
    return [dict(zip(table["columns"], row)) for row in table["rows"]]


def table(report: dict, id_: str, title: str) -> list[dict]:
    return rows(next(t for t in section(report, id_)["tables"] if t["title"].startswith(title)))


def report_of(out: Path) -> dict:
    return json.loads((out / "report.json").read_text())


def scenario1_requests(cached_later: int) -> list[dict]:
    """Two sessions of three turns: turn 1 misses, later turns have `cached_later` of 1000 prompt tokens cached."""
    out = []
    for s, session in enumerate(("s1", "s2")):
        out.append(request(session, 1, "text", start=s, prompt=1000, cached=0, ttft=0.2, details=False))
        out.append(request(session, 2, "tool_call", start=s + 1, prompt=1000, cached=cached_later, latency=0.4))
        out.append(
            request(
                session,
                3,
                "text",
                start=s + 2,
                prompt=1000,
                cached=cached_later,
                ttft=0.05 if cached_later > 500 else 0.15,
            )
        )
    return out


@pytest.fixture()
def two_sides(tmp_path):
    write_folder(
        tmp_path / "a" / "scenario1" / "c2",
        scenario1_requests(900),
        samples=[{"vllm:kv_cache_usage_perc": 0.25}, {"vllm:kv_cache_usage_perc": 0.5}],
    )
    write_folder(
        tmp_path / "b" / "scenario1" / "c2",
        scenario1_requests(300),
        engine="sglang",
        samples=[{"sglang:token_usage": 0.9}],
    )
    return tmp_path / "a", tmp_path / "b"


def test_read_runs_takes_labels_usage_and_timings_from_the_per_request_records(two_sides):
    runs, problems = read_runs(two_sides[0])
    assert problems == [] and list(runs) == ["scenario1/c2"]
    run = runs["scenario1/c2"]
    assert (run.status, run.engine, run.concurrency, len(run.requests), len(run.sessions)) == (
        "completed",
        "vllm",
        2,
        6,
        2,
    )
    first = run.requests[0]
    # vLLM and SGLang send no prompt_tokens_details when nothing was cached: that is 0 cached, not unknown
    assert (first.session, first.turn, first.kind, first.prompt_tokens, first.cached_tokens) == (
        "s1",
        1,
        "text",
        1000,
        0,
    )
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

    entries = [
        request("x", 0, "root", start=0, prompt=100, cached=0, trace_dir="scenario2_sync"),
        request("x", 1, "branch", start=5, prompt=120, cached=96, trace_dir="scenario2_sync"),
        request("x", 2, "branch", start=2, prompt=120, cached=96, trace_dir="scenario2_sync"),
        request("x", 3, "branch", start=7, prompt=120, cached=96, trace_dir="scenario2_sync"),
    ]
    found = roles([_request(e) for e in entries])
    assert [r.turn for r in found["root"]] == [0]
    assert [r.turn for r in found["first"]] == [2]
    assert sorted(r.turn for r in found["later"]) == [1, 3]


def test_scenario3_verdict_says_canonicalization_matters_when_stable_wins_widely_on_both(tmp_path):
    def swarm(hit_stable, hit_noisy):
        out = {}
        for layout, hit in (("stable", hit_stable), ("noisy", hit_noisy)):
            out[layout] = [
                request(
                    f"{layout}-{i}", 1, "text", start=i, prompt=1000, cached=hit * 10, trace_dir=f"scenario3_{layout}"
                )
                for i in range(4)
            ]
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


def test_compare_runs_without_matplotlib_names_the_plots_extra_and_writes_the_tables(two_sides, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    comparison = compare_runs(*two_sides, tmp_path / "out")

    assert comparison.plots_skipped == "fastgen compare needs the plots extra: pip install 'fastgen[plots]'"
    assert not comparison.plots and not list((tmp_path / "out").glob("*.png"))
    assert f"Plots: none ({comparison.plots_skipped})." in (tmp_path / "out" / "report.md").read_text()


def test_compare_with_an_analysis_sets_the_pooled_ceiling_beside_each_hit_ratio(two_sides, tmp_path):
    analysis = tmp_path / "analysis.json"
    by_turn = {
        "1": {"prompt_tokens": 2000, "hit_percent_infinite": 10.0, "hit_percent_capacity": 5.0},
        "2": {"prompt_tokens": 2000, "hit_percent_infinite": 90.0, "hit_percent_capacity": 80.0},
        "3": {"prompt_tokens": 2000, "hit_percent_infinite": 95.0, "hit_percent_capacity": 50.0},
    }
    analysis.write_text(
        json.dumps(
            {
                "format": 1,
                "definition": "vllm",
                "capacity_tokens": 4096,
                "configs": [
                    {
                        "config": "scenario1/c2",
                        "requests": 6,
                        "prompt_tokens": 6000,
                        "hit_percent_infinite": 65.0,
                        "hit_percent_capacity": 45.0,
                        "by_turn": by_turn,
                    }
                ],
            }
        )
    )
    compare_runs(*two_sides, tmp_path / "out", plots=False, analysis=analysis)
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    (row,) = table(report, "runs", "Runs")
    assert (row["ceiling % inf"], row["ceiling % cap"]) == (65.0, 45.0)  # one analysis: one pair of columns
    turn3 = table(report, "scenario1", "Prefix-cache hit ratio by turn")[2]
    assert turn3["ceiling % inf"] == pytest.approx(95.0)


def test_compare_with_an_unreadable_analysis_names_it_and_reports_without_ceilings(two_sides, tmp_path):
    bad = tmp_path / "analysis.json"
    bad.write_text("{")
    comparison = compare_runs(*two_sides, tmp_path / "out", plots=False, analysis=bad)
    assert any(p.startswith(f"--analysis {bad} is not the JSON of fastgen analyze --json") for p in comparison.problems)
    runs = next(s for s in json.loads((tmp_path / "out" / "report.json").read_text())["sections"] if s["id"] == "runs")[
        "tables"
    ][0]
    assert not any(c.startswith("ceiling") for c in runs["columns"])


# Repeats, status, counts and spread (run.json format 2: OUT/L/<scenario>/<config>/repeat-K/)


def test_read_runs_reads_repeat_folders_with_their_status_counts_and_identity(tmp_path):
    config = tmp_path / "a" / "scenario1" / "c2"
    write_repeat(config, scenario1_requests(900), repeat=1, repeats=2)
    failing = scenario1_requests(900)
    failing[4]["error"], failing[4]["computed_metrics"] = {"error_type": "HTTPError", "error_msg": "500"}, None
    write_repeat(
        config, failing, repeat=2, repeats=2, status="incomplete", counts={"sessions": {"total": 2, "failed": 1}}
    )
    runs, problems = read_runs(tmp_path / "a")
    assert problems == [] and list(runs) == ["scenario1/c2"]
    run = runs["scenario1/c2"]
    assert [(r.index, r.status, r.requests_failed, r.sessions_failed) for r in run.repeats] == [
        (1, "completed", 0, 0),
        (2, "incomplete", 1, 1),
    ]
    assert run.status == "incomplete" and not run.usable and run.concurrency == 2
    assert run.repeats[0].server["kv_capacity_tokens"] == 100_000 and run.repeats[0].reset["verified"] is True
    assert {r.repeat for r in run.requests} == {1, 2} and len(run.requests) == 12


def test_read_runs_leaves_out_a_repeat_left_from_an_earlier_bakeoff_that_ran_something_else(tmp_path):
    config = tmp_path / "a" / "scenario1" / "c2"
    # --repeat 2 once, then --repeat 1 with another config: repeat-2 is what the first bakeoff ran
    old = write_repeat(config, scenario1_requests(300), repeat=2, repeats=2)
    new = write_repeat(config, scenario1_requests(900), repeat=1, repeats=1, identity=identity(config_sha256="e" * 64))
    for folder, ended in ((old, 1000.0), (new, 2000.0)):
        record = json.loads((folder / "run.json").read_text())
        (folder / "run.json").write_text(json.dumps({**record, "ended": ended}))
    runs, problems = read_runs(tmp_path / "a")
    assert [r.index for r in runs["scenario1/c2"].repeats] == [1]
    assert problems == [
        "scenario1/c2 repeat 2 is left out: it is not the run the newest repeat (1) is (the config "
        "changed); run the bakeoff with --repeat 1 or more again to replace it"
    ]


def test_pooled_figures_take_only_the_repeats_every_config_has(tmp_path):
    # c2 ran twice and c4 once, each side alike: pooled over both, repeat 2 (c2 alone) must not tilt the median
    for side in ("a", "b"):
        write_repeat(tmp_path / side / "scenario1" / "c2", scenario1_requests(900), repeat=1, repeats=2)
        write_repeat(tmp_path / side / "scenario1" / "c2", scenario1_requests(900), repeat=2, repeats=2)
        write_repeat(tmp_path / side / "scenario1" / "c4", scenario1_requests(0), repeat=1, repeats=1, concurrency=4)
    runs = read_runs(tmp_path / "a")[0]
    pair = Pair(Side("a", runs), Side("b", read_runs(tmp_path / "b")[0]))
    a, b, _ = pair.triple(hit_ratio(), ["scenario1/c2", "scenario1/c4"])
    assert a.repeats == 1 and a.value == pytest.approx(
        hit_percent(runs["scenario1/c2"].repeats[0].requests + runs["scenario1/c4"].repeats[0].requests)
    )


def test_read_runs_reads_an_older_completed_run_with_failed_requests_as_incomplete(tmp_path):
    requests = scenario1_requests(900)
    requests[0]["error"] = {"error_type": "HTTPError", "error_msg": "500"}
    write_folder(tmp_path / "a" / "scenario1" / "c2", requests)  # run.json of an older bakeoff: "completed"
    run = read_runs(tmp_path / "a")[0]["scenario1/c2"]
    assert (run.status, run.requests_failed, run.requests_total) == ("incomplete", 1, 6)
    assert run.reason.startswith("1 of 6 requests failed")


def test_read_runs_counts_failed_sessions_as_the_bakeoff_does(tmp_path):
    from fastgen.bakeoff.status import read_counts

    sessions = [
        {"session_id": "s1", "success": True, "start_time": 1000.0, "end_time": 1010.0, "num_events": 3},
        {
            "session_id": "s2",
            "success": True,
            "error": "late",
            "start_time": 1000.0,
            "end_time": 1010.0,
            "num_events": 4,
        },
    ]
    folder = tmp_path / "a" / "scenario1" / "c2"
    write_folder(folder, scenario1_requests(900), sessions=sessions)  # no counts in its record: read from the records
    run = read_runs(tmp_path / "a")[0]["scenario1/c2"]
    counts = read_counts(folder)  # what the bakeoff would have recorded
    assert (run.sessions_failed, run.sessions_total) == (counts.sessions_failed, counts.sessions) == (1, 2)
    assert (run.requests_failed, run.requests_total) == (counts.failed + counts.lost, 7) == (1, 7)  # 1 lost
    assert run.status == "incomplete" and [s.success for s in run.sessions] == [True, False]


def test_read_runs_takes_itl_from_the_computed_metrics(tmp_path):
    requests = scenario1_requests(900)
    requests[0]["computed_metrics"]["inter_token_latency"] = 0.012
    write_folder(tmp_path / "a" / "scenario1" / "c2", requests)
    assert read_runs(tmp_path / "a")[0]["scenario1/c2"].requests[0].itl == 0.012


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


def swarm_requests(ttfts_ms: list[float], *, output=10) -> list[dict]:
    return [
        request(f"s{i}", 1, "text", start=float(i), prompt=1000, cached=500, ttft=t / 1000, output=output)
        for i, t in enumerate(ttfts_ms)
    ]


def test_compare_summary_states_no_difference_within_the_margin(tmp_path):
    rng = __import__("random").Random(3)
    same = [100 + rng.random() * 200 for _ in range(40)]
    for k in (1, 2):
        write_repeat(tmp_path / "a" / "scenario1" / "c2", swarm_requests(same), repeat=k, repeats=2)
        b = swarm_requests([t * 1.03 for t in same[::-1]])
        write_repeat(tmp_path / "b" / "scenario1" / "c2", b, repeat=k, repeats=2)
    compare_runs(tmp_path / "a", tmp_path / "b", tmp_path / "out", plots=False)
    report = report_of(tmp_path / "out")
    (level,) = table(report, "scenario1", "TTFT of text answers by concurrency")
    assert level["TTFT p50 ms B/A"]["distinguishable"] is False and level["TTFT p50 ms B/A"]["p"] > 0.05
    findings = section(report, "summary")["findings"]
    assert findings[0].startswith("The rule: a B/A is a difference when its 95 % interval")
    assert findings[1].startswith("No difference between A (a) and B (b) in the headline figures of 1 config")
    assert "1.03 ~" in (tmp_path / "out" / "report.md").read_text()


def test_compare_summary_states_a_difference_beyond_the_margin(tmp_path):
    for k, shift in ((1, 0), (2, 2)):
        a = swarm_requests([100 + i + shift for i in range(40)])
        write_repeat(tmp_path / "a" / "scenario1" / "c2", a, repeat=k, repeats=2)
        write_repeat(
            tmp_path / "b" / "scenario1" / "c2", swarm_requests([300 + i - shift for i in range(40)]), repeat=k
        )
    compare_runs(tmp_path / "a", tmp_path / "b", tmp_path / "out", plots=False)
    findings = section(report_of(tmp_path / "out"), "summary")["findings"]
    assert 2 <= len(findings) <= 8
    # the largest first: p50 318.5 against 120.5 (means of each run's)
    assert findings[1].startswith(
        "scenario1/c2: TTFT p50 ms (text answers) 318 on B (b) against 120 on A (a), B/A 2.64 ["
    )
    assert "(n 80 and 80, 40 sessions; 2 runs and 2 runs)" in findings[1]


def test_compare_summary_with_one_run_says_times_are_too_few_to_tell(tmp_path):
    write_repeat(tmp_path / "a" / "scenario1" / "c2", swarm_requests([100 + i for i in range(40)]))
    write_repeat(tmp_path / "b" / "scenario1" / "c2", swarm_requests([300 + i for i in range(40)]))
    compare_runs(tmp_path / "a", tmp_path / "b", tmp_path / "out", plots=False)
    findings = section(report_of(tmp_path / "out"), "summary")["findings"]
    assert findings[1].startswith("No difference between A (a) and B (b) in the headline figures")
    (few,) = [f for f in findings if f.startswith("Too few to tell")]
    assert "TTFT p50 ms, TTFT p95 ms of scenario1/c2 (a time, and one run a side: 2 needed)" in few
    assert "output tok/s of scenario1/c2 (a figure of whole runs, 1 run on a side: 2 needed)" in few
    assert findings[-1].startswith("One run a side: times and rates are too few to tell")


@pytest.mark.filterwarnings("error::RuntimeWarning")  # no division by zero, no mean of nothing, anywhere
def test_compare_bad_input_is_too_few_to_tell_or_a_correct_interval_never_a_traceback(tmp_path):
    from fastgen.results import CompareOptions

    swarm = [100 + 3 * i for i in range(20)]
    # runs of different repeat counts: three of A, two of B
    for k in (1, 2, 3):
        write_repeat(tmp_path / "a" / "scenario1" / "c2", swarm_requests([t + k for t in swarm]), repeat=k, repeats=3)
    for k in (1, 2):
        write_repeat(tmp_path / "b" / "scenario1" / "c2", swarm_requests([t * 2 for t in swarm]), repeat=k, repeats=2)
    # a side with one session
    for side, ttft in (("a", 0.1), ("b", 0.2)):
        alone = [request("s0", t, "text", start=t, prompt=1000, cached=500, ttft=ttft) for t in (1, 2, 3)]
        write_repeat(tmp_path / side / "scenario1" / "c4", alone, concurrency=4)
    # a config with a failed repeat: its second run died before any request
    for side in ("a", "b"):
        write_repeat(tmp_path / side / "scenario1" / "c8", swarm_requests(swarm), concurrency=8, repeats=2)
    failed = tmp_path / "b" / "scenario1" / "c8" / "repeat-2"
    write_repeat(tmp_path / "b" / "scenario1" / "c8", [], concurrency=8, repeat=2, repeats=2, status="failed")
    (failed / "per_request_lifecycle_metrics.json").unlink()
    # identical values, zero spread, on both sides, two runs each
    for side in ("a", "b"):
        for k in (1, 2):
            write_repeat(tmp_path / side / "scenario1" / "c16", swarm_requests([150.0] * 20), repeat=k, concurrency=16)
    for options in (CompareOptions(), CompareOptions(include_incomplete=True)):
        compare_runs(tmp_path / "a", tmp_path / "b", tmp_path / "out", plots=False, options=options, force=True)
        levels = {
            r["config"]: r for r in table(report_of(tmp_path / "out"), "scenario1", "TTFT of text answers by conc")
        }
        uneven = levels["scenario1/c2"]
        assert (uneven["TTFT p50 ms A"]["repeats"], uneven["TTFT p50 ms B"]["repeats"]) == (3, 2)
        assert uneven["TTFT p50 ms B/A"]["low"] < uneven["TTFT p50 ms B/A"]["value"] < uneven["TTFT p50 ms B/A"]["high"]
        one = levels["scenario1/c4"]["TTFT p50 ms B/A"]
        assert one["value"] == 2.0 and one["too_few"].startswith("1 sessions on both sides, 8 needed")
        same = levels["scenario1/c16"]["TTFT p50 ms B/A"]
        assert (same["value"], same["low"], same["high"], same["p"], same["distinguishable"]) == (1, 1, 1, 1, False)
        broken = levels["scenario1/c8"]
        if options.include_incomplete:  # the failed run adds nothing: one run a side, a time too few to tell
            assert broken["TTFT p50 ms B"]["repeats"] == 1 and "one run a side" in broken["TTFT p50 ms B/A"]["too_few"]
        else:
            assert broken["TTFT p50 ms B/A"]["left_out"] == "failed" and broken["status"].startswith("B failed")


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


def with_offset(requests: list[dict], offset: int) -> list[dict]:
    """The same requests rendered `offset` tokens longer, every one, those tokens cached where anything was."""
    for entry in requests:
        usage = entry["info"]["response_metrics"]["server_usage"]
        usage["prompt_tokens"] += offset
        details = usage.get("prompt_tokens_details")
        if details and details["cached_tokens"]:
            details["cached_tokens"] += offset
    return requests


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


def test_compare_shows_output_tokens_per_turn_kind_beside_the_latencies(two_sides, tmp_path):
    compare_runs(*two_sides, tmp_path / "out", plots=False)
    kinds = {r["kind"]: r for r in table(report_of(tmp_path / "out"), "scenario1", "Output tokens per request")}
    assert kinds["tool_call"]["output tokens A"]["value"] == 10 and kinds["text"]["output tokens B"]["n"] == 4


def steady_requests() -> list[dict]:
    """Four sessions two at a time (s0 0-10, s1 1-11, s2 10-20, s3 11-21): the steady window is 1 to 11 s."""
    out = []
    for i, (start, end) in enumerate(((0, 10), (1, 11), (10, 20), (11, 21))):
        out.append(request(f"s{i}", 1, "text", start=start, prompt=1000, cached=0, latency=0.5, ttft=0.4))
        out.append(request(f"s{i}", 2, "text", start=end - 0.5, prompt=1000, cached=1000, latency=0.5, ttft=0.1))
    return out


def test_compare_steady_state_window_and_its_figures_beside_the_whole_run(tmp_path):
    from fastgen.results import CompareOptions

    for side in ("a", "b"):
        write_repeat(tmp_path / side / "scenario3" / "c2_stable", steady_requests())
    compare_runs(tmp_path / "a", tmp_path / "b", tmp_path / "out", plots=False)
    figures = {r["figure"]: r for r in table(report_of(tmp_path / "out"), "steady_state", "Whole run against")}
    assert figures["hit %"]["window A"] == "1.0-11.0 s, 2 in flight"
    assert figures["hit %"]["whole A"]["value"] == pytest.approx(50.0)
    # inside 1-11 s: s1's first turn (1), s0's second (9.5), s2's first (10), s1's second (10.5), s3's first (11)
    assert figures["hit %"]["steady A"]["value"] == pytest.approx(40.0) and figures["hit %"]["steady A"]["n"] == 5
    compare_runs(tmp_path / "a", tmp_path / "b", tmp_path / "out2", plots=False, options=CompareOptions(plateau=0.5))
    figures = {r["figure"]: r for r in table(report_of(tmp_path / "out2"), "steady_state", "Whole run against")}
    assert figures["hit %"]["window A"] == "0.0-11.0 s, 2 in flight"


def test_compare_throughput_per_gpu_hour_and_kv_usage_in_tokens(tmp_path):
    write_repeat(
        tmp_path / "a" / "scenario2" / "c2_sync",
        scenario1_requests(900),
        identity=identity(server={"gpus": 2, "kv_capacity_tokens": 100_000}),
        samples=[{"vllm:kv_cache_usage_perc": 0.5}],
    )
    write_repeat(
        tmp_path / "b" / "scenario2" / "c2_sync",
        scenario1_requests(900),
        identity=identity(server={"engine": "sglang", "gpus": 1, "kv_capacity_tokens": 20_000}),
        samples=[{"sglang:token_usage": 0.9, "sglang:num_used_tokens": 17_950}],
    )
    compare_runs(tmp_path / "a", tmp_path / "b", tmp_path / "out", plots=False)
    report = report_of(tmp_path / "out")
    (row,) = table(report, "throughput", "Throughput")
    # 2 sessions over 36 s: 200 sessions/h; 60 output tokens over 3.5 s
    assert row["sessions/h A"]["value"] == pytest.approx(200.0)
    assert row["sessions/GPU-h A"]["value"] == pytest.approx(100.0)
    assert row["sessions/GPU-h B"]["value"] == pytest.approx(200.0)
    assert row["output tok/GPU-h A"]["value"] == pytest.approx(60 / 3.5 * 3600 / 2)
    assert row["output tok/s B/A"]["too_few"] == "a figure of whole runs, 1 run on a side: 2 needed"
    kv_section = next(t for t in section(report, "scenario2")["tables"] if t["title"].startswith("Hit ratio and peak"))
    (kv,) = rows(kv_section)
    # SGLang's tokens are its own count (sglang:num_used_tokens), not its gauge rounded to 1 % x the capacity
    assert (kv["peak KV % A"]["value"], kv["peak KV % B"]["value"]) == (50.0, 89.75) and "peak KV % B/A" not in kv
    assert kv["peak KV tokens A"]["value"] == 50_000 and kv["peak KV tokens B"]["value"] == 17_950
    assert kv["peak KV tokens B/A"]["value"] == pytest.approx(0.359) and kv["peak KV tokens B/A"]["too_few"]
    assert "sglang: sglang:num_used_tokens (a count of tokens)" in kv_section["note"]


def test_compare_shows_no_kv_tokens_from_a_gauge_rounded_to_one_percent(tmp_path):
    for side, samples in (("a", [{"sglang:token_usage": 0.0}]), ("b", [{"sglang:token_usage": 0.01}])):
        write_repeat(
            tmp_path / side / "scenario2" / "c2_sync",
            scenario1_requests(900),
            identity=identity(server={"engine": "sglang", "kv_capacity_tokens": 2_097_152}),
            samples=samples,
        )
    compare_runs(tmp_path / "a", tmp_path / "b", tmp_path / "out", plots=False)
    kv_section = next(
        t for t in section(report_of(tmp_path / "out"), "scenario2")["tables"] if t["title"].startswith("Hit ratio")
    )
    (kv,) = rows(kv_section)
    assert kv["peak KV % B"]["value"] == 1.0 and kv["peak KV tokens B"]["value"] is None
    assert kv["peak KV tokens B/A"]["value"] is None
    assert "sglang:token_usage only, rounded to 1% of the cache: no count of tokens and no B/A" in kv_section["note"]


def test_compare_slo_gives_the_largest_concurrency_that_meets_the_ttft_target(tmp_path):
    from fastgen.results import CompareOptions

    for level, (a_ms, b_ms) in {2: (100, 100), 4: (200, 400), 8: (600, 900)}.items():
        write_repeat(tmp_path / "a" / "scenario1" / f"c{level}", swarm_requests([a_ms] * 20), concurrency=level)
        write_repeat(tmp_path / "b" / "scenario1" / f"c{level}", swarm_requests([b_ms] * 20), concurrency=level)
    compare_runs(
        tmp_path / "a", tmp_path / "b", tmp_path / "out", plots=False, options=CompareOptions(slo_ttft_p95_ms=300)
    )
    (row,) = table(report_of(tmp_path / "out"), "slo", "Largest concurrency")
    assert (row["concurrencies"], row["largest A"], row["largest B"]) == ("2, 4, 8", 4, 2)
    assert row["TTFT p95 ms A"]["value"] == pytest.approx(200.0)


def test_compare_setup_header_says_what_each_side_ran(tmp_path):
    write_repeat(tmp_path / "a" / "scenario1" / "c2", scenario1_requests(900))
    write_repeat(
        tmp_path / "b" / "scenario1" / "c2",
        scenario1_requests(900),
        identity=identity(server={"engine": "sglang", "version": "0.5.0", "kv_capacity_tokens": 33_000}),
        reset={"done": "POST /flush_cache", "verified": False, "how": "probe found 512 cached"},
    )
    compare_runs(tmp_path / "a", tmp_path / "b", tmp_path / "out", plots=False)
    setup = {r[""]: r for r in table(report_of(tmp_path / "out"), "setup", "What each side ran")}
    assert (setup["engine and version"]["A: a"], setup["engine and version"]["B: b"]) == ("vllm 0.11.0", "sglang 0.5.0")
    assert setup["KV capacity (tokens)"]["B: b"] == "33,000" and setup["dataset (manifest sha256)"]["A: a"] == "d" * 12
    assert setup["cache reset"]["B: b"] == "POST /flush_cache: verified in 0 of 1 runs, seen to fail in 1"


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


# Writing: never over a file compare did not write


def test_compare_refuses_to_overwrite_a_report_it_did_not_write(two_sides, tmp_path):
    from fastgen.errors import OutputError

    out = tmp_path / "out"
    compare_runs(*two_sides, out, plots=False)
    compare_runs(*two_sides, out, plots=False)  # its own files: written again
    (out / "report.md").write_text((out / "report.md").read_text() + "\nmy notes\n")
    with pytest.raises(
        OutputError,
        match=r"report.md was not written by fastgen compare \(or was edited since\); "
        r"move it away, choose another --out, or pass --force",
    ):
        compare_runs(*two_sides, out, plots=False)
    assert (out / "report.md").read_text().endswith("my notes\n")


def test_compare_force_keeps_the_users_file_as_edited_and_writes_the_new_one(two_sides, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "report.json").write_text("mine")
    comparison = compare_runs(*two_sides, out, plots=False, force=True)
    assert comparison.moved == ["report.json.edited"] and (out / "report.json.edited").read_text() == "mine"
    assert report_of(out)["format"] == 3
    (out / "report.json").write_text("mine again")
    compare_runs(*two_sides, out, plots=False, force=True)
    assert (out / "report.json.edited-2").read_text() == "mine again"  # the first one kept too


def test_compare_plots_shade_the_steady_state_window(tmp_path):
    pytest.importorskip("matplotlib")
    for side in ("a", "b"):
        write_repeat(tmp_path / side / "scenario3" / "c2_stable", steady_requests())
    comparison = compare_runs(tmp_path / "a", tmp_path / "b", tmp_path / "out")
    plot = next(p for s in comparison.sections for p in s.plots if p.name == "scenario3_c2_stable_hit_over_time")
    assert plot.shade == {"a": [1.0, 11.0], "b": [1.0, 11.0]}
    (tmp_path / "out" / comparison.plots[plot.name]).write_bytes(b"not mine")
    from fastgen.errors import OutputError

    with pytest.raises(OutputError, match="scenario3_c2_stable_hit_over_time.png was not written by fastgen compare"):
        compare_runs(tmp_path / "a", tmp_path / "b", tmp_path / "out")


def fleet_record(policy: str, rows: list[tuple[str, int, int, int]]) -> dict:
    """run.json's fleet, as the bakeoff writes it behind a router: (url, requests, prompt, cached) per replica."""
    replicas = [{"url": u, "requests": n, "prompt_tokens": p, "cached_tokens": c} for u, n, p, c in rows]
    total = {k: sum(r[k] for r in replicas) for k in ("requests", "prompt_tokens", "cached_tokens")}
    return {"router": "http://router:30000", "policy": policy, "replicas": replicas, "sum": total}


def test_compare_shows_each_replicas_share_and_the_spread_behind_a_router(tmp_path):
    requests = scenario1_requests(900)  # 6 requests of 1000 prompt tokens, 3600 cached
    router = {"url": "http://router:30000", "policy": None, "replica_urls": ["http://r1", "http://r2"]}
    for label, policy, rows in (
        ("rr", "round_robin", [("http://r1", 3, 3000, 1200), ("http://r2", 3, 3000, 2400)]),
        ("ca", "cache_aware", [("http://r1", 5, 5000, 3600), ("http://r2", 1, 1000, 0)]),
    ):
        write_repeat(
            tmp_path / label / "scenario1" / "c2",
            requests,
            identity=identity(router={**router, "policy": policy}),
            counts={"fleet": fleet_record(policy, rows)},
        )
    write_repeat(  # a side whose counters do not add up to its requests
        tmp_path / "bad" / "scenario1" / "c2",
        requests,
        identity=identity(router={**router, "policy": "round_robin"}),
        counts={"fleet": fleet_record("round_robin", [("http://r1", 6, 5999, 3600)])},
    )
    compare_runs(tmp_path / "rr", tmp_path / "ca", tmp_path / "out", plots=False)
    report = report_of(tmp_path / "out")
    spread = table(report, "replicas", "Spread across replicas")
    shares = table(report, "replicas", "Each replica's share")
    setup = {row[""]: row for row in table(report, "setup", "What each side ran")}
    assert setup["router (policy, replicas)"] == {
        "": "router (policy, replicas)",
        "A: rr": "round_robin, 2 replicas",
        "B: ca": "cache_aware, 2 replicas",
    }
    assert [(r["side"], r["policy"], r["replicas"], r["counters = requests"]) for r in spread] == [
        ("A: rr", "round_robin", 2, "yes"),
        ("B: ca", "cache_aware", 2, "yes"),
    ]
    value = lambda cell: cell["value"]  # noqa: E731
    figures = [value(spread[1][k]) for k in ("imbalance", "hit % lowest", "hit % highest", "fleet hit %")]
    assert figures == pytest.approx([5 / 3, 0.0, 72.0, 60.0], abs=1e-6)
    assert [(r["policy"], r["replica"], r["requests"], value(r["hit %"])) for r in shares] == [
        ("round_robin", "http://r1", 3, 40.0),
        ("round_robin", "http://r2", 3, 80.0),
        ("cache_aware", "http://r1", 5, 72.0),
        ("cache_aware", "http://r2", 1, 0.0),
    ]
    assert [value(r["share %"]) for r in shares] == pytest.approx([50.0, 50.0, 500 / 6, 100 / 6], abs=1e-6)
    assert not section(report, "replicas")["problems"]
    compare_runs(tmp_path / "rr", tmp_path / "bad", tmp_path / "out-bad", plots=False)
    bad = report_of(tmp_path / "out-bad")
    assert [r["counters = requests"] for r in table(bad, "replicas", "Spread")] == ["yes", "NO"]
    assert section(bad, "replicas")["problems"] == [
        "scenario1/c2 on bad, repeat 1: the replicas counted 5,999 prompt tokens, the requests were answered with 6,000"
    ]


def test_compare_without_a_router_has_no_replicas_section(two_sides, tmp_path):
    compare_runs(*two_sides, tmp_path / "out", plots=False)
    assert all(s["id"] != "replicas" for s in report_of(tmp_path / "out")["sections"])
