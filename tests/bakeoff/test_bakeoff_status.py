"""bakeoff/status.py: how a run ended, from what inference-perf wrote: failed requests, a restarted server, no cached
tokens reported, the failure's own line."""

from __future__ import annotations

import json

import pytest
from _support.bakeoff import QUICK, bakeoff, engine, run_record

from fastgen.bakeoff.status import count_records, judge_run, last_error, read_counts


@pytest.mark.slow  # fastgen bakeoff (inference-perf) against fake engines
def test_bakeoff_warns_when_the_server_hits_its_cache_but_reports_no_cached_tokens(dataset, tmp_path):
    with engine(dataset, tmp_path, "vllm", "--no-cache-report") as server:
        result = bakeoff(dataset, tmp_path, server.url, "--configs", QUICK)
    assert result.returncode == 0
    warning = (
        "the server hit its prefix cache but reported no cached tokens; restart it with "
        "--enable-prompt-tokens-details or every hit ratio reads 0"
    )
    record = run_record(tmp_path, QUICK)
    assert warning in result.stderr and record["warning"] == warning
    # no cached tokens in any answer: the reset cannot be verified, and the record says why
    assert record["reset"]["verified"] is None and "--enable-prompt-tokens-details" in record["reset"]["how"]


@pytest.mark.slow  # fastgen bakeoff (inference-perf) against fake engines
def test_bakeoff_counts_failed_requests_as_incomplete(dataset, tmp_path):
    with engine(dataset, tmp_path, "vllm", "--fail-every", "3") as server:
        result = bakeoff(dataset, tmp_path, server.url, "--configs", QUICK)
    record = run_record(tmp_path, QUICK)
    assert result.returncode == 1 and record["status"] == "incomplete"
    requests, sessions = record["requests"], record["sessions"]
    assert requests["expected"] == 12 and requests["failed"] >= 1 and sessions == {"total": 2, "failed": 2}
    assert record["reason"].startswith(f"{requests['failed']} of 12 requests failed")
    assert record["errors"] and record["errors"][0].startswith("HTTP Error 500")
    assert f"  {QUICK}: incomplete: {record['reason']}" in result.stdout
    assert "0 completed, 1 incomplete" in result.stdout


@pytest.mark.slow  # fastgen bakeoff (inference-perf) against fake engines
def test_bakeoff_server_restarted_mid_config_fails_the_run(dataset, tmp_path):
    # three requests check the server, three verify the reset, then the replay's: it restarts after the third of those
    with engine(dataset, tmp_path, "vllm", "--restart-after", "9") as server:
        result = bakeoff(dataset, tmp_path, server.url, "--configs", QUICK)
    record = run_record(tmp_path, QUICK)
    assert result.returncode == 1 and record["status"] == "failed"
    assert record["reason"] == "the server restarted during the run (its process start time changed)"
    assert f"  {QUICK}: failed: the server restarted during the run" in result.stdout


def test_failure_reason_is_the_exceptions_last_line_not_the_traceback_header(tmp_path):
    log = tmp_path / "inference-perf.log"
    log.write_text(
        "2026-01-01 00:00:00,000 - inference_perf.config.config - INFO - Using configuration from: run-config.yml\n"
        "Traceback (most recent call last):\n"
        '  File "/venv/bin/inference-perf", line 6, in <module>\n'
        "    sys.exit(main_cli())\n"
        "             ^^^^^^^^^^\n"
        "FileNotFoundError: [Errno 2] No such file or directory: 'reports/x/c1.partial/run-config.yml'\n"
    )
    expected = (
        "FileNotFoundError: [Errno 2] No such file or directory: 'reports/x/c1.partial/run-config.yml' "
        "(see inference-perf.log)"
    )
    assert last_error(log) == expected
    assert judge_run(exit_code=1, counts=None, timeout_s=None, log=log) == (
        "failed",
        f"inference-perf exited with 1: {expected}",
    )
    log.write_text("x - ERROR - first\nx - ERROR - the last error\nshutting down\n")
    assert last_error(log) == "the last error (see inference-perf.log)"


def test_a_session_with_an_error_but_success_true_is_failed_and_a_missing_event_lost(tmp_path):
    requests = [{"start_time": 1.0, "error": None}, {"start_time": 2.0, "error": {"error_type": "HTTP Error 500"}}]
    sessions = [
        {"session_id": "a", "success": True, "error": None, "num_events": 2},
        {"session_id": "b", "success": True, "error": {"error_type": "Timeout", "error_msg": "late"}, "num_events": 1},
    ]
    counts = count_records(requests, sessions)
    assert (counts.failed, counts.sessions_failed, counts.expected, counts.lost) == (1, 1, 3, 1)
    assert counts.errors == ["HTTP Error 500", "Timeout: late"]
    assert counts.problems() == "1 of 3 requests failed, 1 of 3 requests not recorded, 1 of 2 sessions failed"
    (tmp_path / "per_request_lifecycle_metrics.json").write_text(json.dumps(requests))
    (tmp_path / "per_session_lifecycle_metrics.json").write_text(json.dumps(sessions))
    assert read_counts(tmp_path) == counts  # the bakeoff's path reads the same
    assert count_records(requests, None).session_report is False
