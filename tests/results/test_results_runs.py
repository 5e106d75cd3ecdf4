"""results/runs.py: one server's run folders read as records: labels, usage, timings, repeats, status and counts, and
the files it cannot read named."""

from __future__ import annotations

import json

import pytest
from _support.results import identity, scenario1_requests, write_folder, write_repeat

from fastgen.results import compare_runs, read_runs


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
