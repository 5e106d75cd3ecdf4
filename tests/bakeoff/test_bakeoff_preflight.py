"""bakeoff/preflight.py: what the bakeoff checks once before the first config: a named tool_choice held, cached tokens
reported, /metrics served."""

from __future__ import annotations

import json
import threading

import pytest
from _support.bakeoff import MODEL, QUICK, bakeoff, engine, run_record

from e2e.suites.bakeoff import is_probe
from fastgen.bakeoff.server import LiveServer
from fastgen.engine_endpoints import VLLM
from fastgen.errors import ServerError


@pytest.mark.slow  # fastgen bakeoff (inference-perf) against fake engines
def test_bakeoff_says_once_before_the_first_config_that_sglang_reports_no_cached_tokens(dataset, tmp_path):
    with engine(dataset, tmp_path, "sglang", "--no-cache-report") as server:
        result = bakeoff(dataset, tmp_path, server.url, "--configs", QUICK, "--repeat", "2")
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stderr.splitlines()
    warning = (
        f"fastgen: warning: a probe prompt sent twice got no cached tokens the second time: {server.url} does "
        f"not report them (restart it with --enable-cache-report) or caches no prefixes; every hit ratio of "
        f"these runs would read 0"
    )
    assert lines.count(warning) == 1, result.stderr
    assert lines.index(warning) < next(i for i, line in enumerate(lines) if line.startswith("[1/2] "))
    for repeat in (1, 2):
        assert run_record(tmp_path, QUICK, repeat)["identity"]["server"]["cached_tokens_reported"] is False


@pytest.mark.slow  # fastgen bakeoff (inference-perf) against fake engines
def test_bakeoff_stops_before_the_first_config_when_a_named_tool_choice_is_not_held(dataset, tmp_path):
    # SGLang 0.5.23 with the hermes parser: the forced tool's name is not held (another tool's comes back)
    with engine(dataset, tmp_path, "sglang", "--ignore-tool-choice") as server:
        refused = bakeoff(dataset, tmp_path, server.url, "--configs", QUICK)
        log = server.log()
        ran = (tmp_path / "reports" / "x" / "scenario2").exists()
        went_on = bakeoff(dataset, tmp_path, server.url, "--configs", QUICK, "--no-tool-check")
    assert refused.returncode == 1 and not ran
    assert refused.stderr.strip().splitlines()[-1] == (
        f"fastgen: error: {server.url} did not hold a named tool_choice: a request forcing 'run_tests' of two tools "
        f"was answered with a call of 'read_file'; restart it with a --tool-call-parser that holds a named "
        f"tool_choice (with SGLang 0.5.23, qwen3_coder held it; hermes did not, even with "
        f"SGLANG_TOOL_STRICT_LEVEL=2); or pass --no-tool-check if the dataset has no tool calls"
    )
    assert len(log) == 1 and is_probe(log[0]) and log[0]["body"]["tool_choice"]["function"]["name"] == "run_tests"
    # --no-tool-check: the runs go on, the record says it was not checked
    assert went_on.returncode == 0, went_on.stdout + went_on.stderr
    assert run_record(tmp_path, QUICK)["identity"]["server"]["tool_choice_held"] is None


@pytest.mark.slow  # fastgen bakeoff (inference-perf) against fake engines
def test_bakeoff_with_tool_choice_as_recorded_sends_none_and_needs_no_tool_check(dataset, tmp_path):
    # the server that ignores a named tool_choice is no obstacle when none is sent: both engines then render every tool
    with engine(dataset, tmp_path, "sglang", "--ignore-tool-choice") as server:
        result = bakeoff(dataset, tmp_path, server.url, "--configs", QUICK, "--tool-choice", "as_recorded")
        log = server.log()
    assert result.returncode == 0, result.stdout + result.stderr
    requests = [e for e in log if "body" in e]  # the reset probes and the replay: no tool_choice probe among them
    assert requests and not any("tool_choice" in e["body"] for e in requests)
    assert any(not is_probe(e) and e["body"].get("tools") for e in requests)
    identity = run_record(tmp_path, QUICK)["identity"]
    assert identity["tool_choice"] == "as_recorded" and identity["server"]["tool_choice_held"] is None


def test_tool_check_names_vllms_flags_when_a_named_tool_choice_is_refused():
    from http.server import BaseHTTPRequestHandler, HTTPServer

    from fastgen.bakeoff.preflight import check_server

    said = 'tool_choice=function "run_tests" requires --tool-call-parser to be set'

    class NoParser(BaseHTTPRequestHandler):  # vLLM started without --tool-call-parser
        def answer(self, status: int, body: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self):  # noqa: N802 - http.server's name
            self.answer(200, b"")

        def do_POST(self):  # noqa: N802
            self.rfile.read(int(self.headers["Content-Length"]))
            self.answer(400, json.dumps({"error": {"message": said, "type": "BadRequestError", "code": 400}}).encode())

        def log_message(self, *args):
            pass

    httpd = HTTPServer(("127.0.0.1", 0), NoParser)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{httpd.server_port}"
    try:
        with pytest.raises(ServerError) as refused:
            check_server(LiveServer(url, VLLM, (MODEL,)), MODEL)
        assert check_server(LiveServer(url, VLLM, (MODEL,)), MODEL, tool_check=False).tool_choice_held is None
    finally:
        httpd.shutdown()
    assert str(refused.value) == (
        f"{url} refused a named tool_choice (HTTP 400: {said}); restart it with "
        f"--enable-auto-tool-choice --tool-call-parser <your model's>; or pass "
        f"--no-tool-check if the dataset has no tool calls"
    )


@pytest.mark.slow  # fastgen bakeoff (inference-perf) against fake engines
def test_bakeoff_against_sglang_without_metrics_runs_on_and_says_what_is_missing(dataset, tmp_path):
    with engine(dataset, tmp_path, "sglang", "--no-metrics") as server:
        result = bakeoff(dataset, tmp_path, server.url, "--configs", QUICK)
        log = server.log()
    assert result.returncode == 0, result.stdout + result.stderr
    warnings = [line for line in result.stderr.splitlines() if line.startswith("fastgen: warning: ")]
    assert warnings == [
        f"fastgen: warning: {server.url} serves no /metrics (HTTP 404): the runs go on without KV usage, the "
        f"engine's counters, a restart check or a wait until idle before each reset (resets rely on the engine's own "
        f"wait); restart it with --enable-metrics to have them"
    ]
    record = run_record(tmp_path, QUICK)
    assert record["status"] == "completed" and record["reset"]["verified"] is True
    assert (record["metrics_samples"], record["metrics_errors"]) == (0, 0)
    assert record["identity"]["server"]["metrics_served"] is False
    assert record["identity"]["server"]["kv_capacity_tokens"]  # from /get_server_info
    scheduler = record["identity"]["server"]["scheduler"]  # and the scheduler's settings, in SGLang's names
    assert (scheduler["source"], scheduler["schedule_policy"]) == ("GET /get_server_info", "fcfs")
    assert scheduler["chunked_prefill_size"] == -1 and scheduler["effective_max_running_requests"] > 0
    # no idle wait of fastgen's: every flush asked SGLang to wait itself
    assert all(e["timeout"] > 0 for e in log if e.get("event") == "reset")
