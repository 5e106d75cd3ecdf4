"""`fastgen bakeoff` and `fastgen compare` as a user runs them: real processes, the real inference-perf, fake engines
on loopback (e2e/fake_engine.py) that log every request and reset.

The first test is the e2e bakeoff on two configs (e2e/bakeoff.py runs six with `make e2e`); the others each break
one thing a live bakeoff meets: a server that dies mid-config (vLLM or SGLang), fails requests, restarts, keeps its
cache through a reset, the wrong model, no reset endpoint, a busy server (SGLang asked to wait for idle itself), no
cached tokens reported, a named tool_choice not held, no /metrics, an unreachable URL, a label from another server, a
changed dataset, a rerun, repeats, Ctrl-C; and the README's own command, run from the dataset's folder.
"""

from __future__ import annotations

import json
import statistics
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from e2e.suites.bakeoff import FakeEngineProcess, is_probe, run_fake_bakeoff, segments
from e2e.suites.runner import fastgen_command
from e2e.suites.run import Dataset, free_port, generate
from e2e.engines.server import ServerThread
from fastgen.bakeoff.identity import identity_change, run_identity, server_identity
from fastgen.bakeoff.plan import run_config_text, select_configs
from fastgen.bakeoff.reset import wait_idle
from fastgen.formats.run_record import RunRecord, write_run
from fastgen.bakeoff.sampler import parse_metrics
from fastgen.bakeoff.server import LiveServer, fetch, probe_server
from fastgen.bakeoff.status import count_records, judge_run, last_error, read_counts
from fastgen.engines import VLLM
from fastgen.errors import OutputError, ServerError

ROOT = Path(__file__).resolve().parent.parent
QUICK = "scenario2/c10_sync"  # 12 requests, about 6 s


MODEL = "meta-llama/Llama-3.3-70B-Instruct"


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> Path:
    workdir = tmp_path_factory.mktemp("bakeoff-data")
    generate(workdir, "http://127.0.0.1:9", Dataset())
    return workdir


@pytest.fixture(scope="module")
def readme_dataset(tmp_path_factory) -> Path:
    """A dataset as the README makes it: configs/ beside traces/, paths in the configs relative."""
    workdir = tmp_path_factory.mktemp("bakeoff-readme")
    arguments = [a for a in Dataset().arguments(workdir, "http://127.0.0.1:9") if a != "--absolute-paths"]
    result = subprocess.run([sys.executable, "-m", "fastgen", *arguments], capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    assert "../../traces" in (workdir / "configs" / "scenario2" / "c10_sync.yml").read_text()
    return workdir


def readme_bakeoff(folder: Path, url: str, *args: str) -> subprocess.CompletedProcess:
    """The README's command, from the dataset's folder (reports go to ./reports)."""
    return subprocess.run(
        [sys.executable, "-m", "fastgen", "bakeoff", "--url", url, "--label", "vllm", *args],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=folder,
    )


def engine(dataset: Path, tmp_path: Path, flavour: str = "vllm", *extra: str, **kwargs) -> FakeEngineProcess:
    return FakeEngineProcess(
        dataset / "traces" / "tokenizer", tmp_path / "engine.jsonl", flavour, extra=tuple(extra), **kwargs
    )


def bakeoff(dataset: Path, tmp_path: Path, url: str, *args: str) -> subprocess.CompletedProcess:
    return fastgen_command(
        "bakeoff",
        "--url",
        url,
        "--label",
        "x",
        "--config-dir",
        str(dataset / "configs"),
        "--out",
        str(tmp_path / "reports"),
        "--scrape-interval",
        "0.5",
        *args,
        timeout_s=600,
    )


def run_record(tmp_path: Path, name: str, repeat: int = 1) -> dict:
    return json.loads((tmp_path / "reports" / "x" / name / f"repeat-{repeat}" / "run.json").read_text())


@pytest.mark.slow  # fastgen bakeoff (inference-perf) against fake engines
def test_bakeoff_on_two_engines_then_compare_shows_what_the_engines_logged(tmp_path):
    failures = run_fake_bakeoff(tmp_path, ["scenario1/c10", "scenario3/c100_noisy"])
    assert failures == []
    report = (tmp_path / "report" / "report.md").read_text()
    assert "## Scenario 1" in report and "## Scenario 3" in report and "| scenario3/c100_noisy |" in report


@pytest.mark.slow  # fastgen bakeoff (inference-perf) against fake engines
def test_bakeoff_skips_a_completed_config_unless_rerun(dataset, tmp_path):
    with engine(dataset, tmp_path) as server:
        assert bakeoff(dataset, tmp_path, server.url, "--configs", QUICK).returncode == 0
        first = run_record(tmp_path, QUICK)
        again = bakeoff(dataset, tmp_path, server.url, "--configs", QUICK)
        assert again.returncode == 0 and "1 skipped" in again.stdout
        assert run_record(tmp_path, QUICK) == first
        assert bakeoff(dataset, tmp_path, server.url, "--configs", QUICK, "--rerun").returncode == 0
        resets = [e for e in server.log() if e.get("event") == "reset"]
    assert "running" not in again.stderr and f"{QUICK}: skipped" in again.stderr
    # a verified reset is two: one the probe checks, one that drops the probe's own prefix
    assert len(resets) == 4 and run_record(tmp_path, QUICK)["started"] > first["started"]
    assert first["status"] == "completed" and first["reason"] is None
    assert first["reset"]["done"] == "POST /reset_prefix_cache" and first["reset"]["verified"] is True
    assert first["requests"] == {"expected": 12, "recorded": 12, "failed": 0}
    assert first["sessions"] == {"total": 2, "failed": 0} and first["errors"] == []
    assert first["metrics_samples"] >= 2 and first["identity"]["server"]["engine"] == "vllm"
    assert (first["format"], first["repeat"], first["repeats"]) == (2, 1, 1)
    # what analyze --server-from reads: the scheduler's settings from vLLM's dev-mode GET /server_info
    scheduler = first["identity"]["server"]["scheduler"]
    assert scheduler["source"] == "GET /server_info?config_format=json" and scheduler["max_num_batched_tokens"] > 0
    assert scheduler["block_size"] == first["identity"]["server"]["block_size"]


@pytest.mark.slow  # fastgen bakeoff (inference-perf) against fake engines
@pytest.mark.parametrize("flavour", ["vllm", "sglang"])
def test_bakeoff_server_that_dies_mid_config_fails_it_and_stops(dataset, tmp_path, flavour):
    # three requests check the server, three verify the reset, then three of the replay's are answered
    with engine(dataset, tmp_path, flavour, "--die-after", "9") as server:
        result = bakeoff(dataset, tmp_path, server.url, "--configs", QUICK, "scenario1/c1")
    assert result.returncode == 1
    # the design's order: scenario 1 first
    assert "scenario1/c1: failed: the server stopped answering during the run" in result.stdout
    assert "scenario2/c10_sync: failed: not run: the server stopped answering" in result.stdout
    record = run_record(tmp_path, "scenario1/c1")
    assert record["status"] == "failed" and record["metrics_errors"] >= 1
    assert not (tmp_path / "reports" / "x" / "scenario2").exists()


@pytest.mark.slow  # fastgen bakeoff (inference-perf) against fake engines
def test_bakeoff_against_another_model_names_both(dataset, tmp_path):
    with engine(dataset, tmp_path, "vllm", "--model", "Qwen/Qwen3-32B") as server:
        result = bakeoff(dataset, tmp_path, server.url)
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1] == (
        f"fastgen: error: {server.url} serves Qwen/Qwen3-32B, the configs ask for meta-llama/Llama-3.3-70B-Instruct; "
        f"start the server with --served-model-name meta-llama/Llama-3.3-70B-Instruct, or regenerate the configs "
        f"with --model Qwen/Qwen3-32B"
    )
    assert not (tmp_path / "reports").exists()


@pytest.mark.slow  # fastgen bakeoff (inference-perf) against fake engines
def test_bakeoff_without_a_reset_endpoint_says_how_to_get_one_or_go_on(dataset, tmp_path):
    with engine(dataset, tmp_path, "vllm", "--no-reset-endpoint") as server:
        refused = bakeoff(dataset, tmp_path, server.url, "--configs", QUICK)
        error = refused.stderr.strip().splitlines()[-1]
        assert refused.returncode == 1 and error.startswith(
            f"fastgen: error: {server.url} has no POST /reset_prefix_cache (HTTP 404): vLLM serves"
        )
        assert "VLLM_SERVER_DEV_MODE=1" in error and "--no-reset" in error
        assert not (tmp_path / "reports" / "x" / "scenario2").exists() or not any(
            (tmp_path / "reports" / "x" / "scenario2").iterdir()
        )
        went_on = bakeoff(dataset, tmp_path, server.url, "--configs", QUICK, "--no-reset")
    assert went_on.returncode == 0 and run_record(tmp_path, QUICK)["reset"] == {
        "done": "none (--no-reset)",
        "verified": None,
        "how": "not reset: --no-reset",
    }


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


@pytest.mark.slow  # fastgen bakeoff (inference-perf) against fake engines
def test_bakeoff_waits_until_sglang_has_answered_its_own_warmup_request(dataset, tmp_path):
    # SGLang answers /v1/models before its startup warmup request is answered and counts that request's tokens: a
    # bakeoff sent at once could have them land in its first run's counters
    with engine(dataset, tmp_path, "sglang", "--warmup", "4") as server:
        started = parse_metrics(fetch(server.url + "/metrics").body.decode(), "process_")["process_start_time_seconds"]
        result = bakeoff(dataset, tmp_path, server.url, "--configs", QUICK)
        log = server.log()
    assert result.returncode == 0, result.stdout + result.stderr
    chats = [e["t"] for e in log if "body" in e]
    assert chats and min(chats) >= started + 4
    assert f"{server.url}: sglang is still starting (GET /health answers 503); waiting" in result.stderr
    assert run_record(tmp_path, QUICK)["status"] == "completed"


def test_wait_started_gives_up_with_one_line_naming_the_endpoint(dataset):
    from e2e.engines.fake_engine import EngineProfile

    profile = EngineProfile(flavour="sglang", warmup_s=60)
    with ServerThread(dataset / "traces" / "tokenizer", profile=profile) as thread:
        server = probe_server(thread.base_url, MODEL)
        assert server.starting()
        with pytest.raises(ServerError, match=r"GET http://\S+/health still answers 503 \(starting\) after 0.3 s"):
            server.wait_started(timeout_s=0.3, poll_s=0.1)
    # vLLM says started by answering /v1/models: nothing to wait for
    assert not LiveServer("http://127.0.0.1:9", VLLM, (MODEL,)).starting()


@pytest.mark.slow  # fastgen bakeoff (inference-perf) against fake engines
def test_bakeoff_unreachable_url_is_one_line(dataset, tmp_path):
    url = f"http://127.0.0.1:{free_port()}"
    result = bakeoff(dataset, tmp_path, url)
    assert result.returncode == 1
    assert (
        result.stderr.strip()
        == f"fastgen: error: cannot reach {url}: Connection refused; start the server, or fix --url"
    )


@pytest.mark.slow  # fastgen bakeoff (inference-perf) against fake engines
def test_bakeoff_ctrl_c_keeps_finished_runs_and_leaves_no_partial_run(dataset, tmp_path):
    with engine(dataset, tmp_path) as server:
        command = [
            sys.executable,
            "-m",
            "fastgen",
            "bakeoff",
            "--url",
            server.url,
            "--label",
            "x",
            "--config-dir",
            str(dataset / "configs"),
            "--out",
            str(tmp_path / "reports"),
            "--configs",
            QUICK,
            "scenario1/c10",
        ]
        proc = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        partial = tmp_path / "reports" / "x" / "scenario2" / "c10_sync" / "repeat-1.partial"  # after scenario1/c10
        deadline = time.monotonic() + 120
        while not (partial / "inference-perf.log").exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(2)
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr
    assert stderr.strip().splitlines()[-1] == (
        f"fastgen: interrupted; 1 finished run kept in {tmp_path / 'reports' / 'x'}, the unfinished one removed; run "
        f"the same command again to go on"
    )
    assert run_record(tmp_path, "scenario1/c10")["status"] == "completed"
    assert not partial.exists() and not (tmp_path / "reports" / "x" / "scenario2" / "c10_sync" / "repeat-1").exists()


def test_reset_waits_until_the_server_is_idle(dataset):
    from e2e.engines.fake_engine import EngineProfile

    with ServerThread(dataset / "traces" / "tokenizer", profile=EngineProfile(flavour="vllm")) as thread:
        server = probe_server(thread.base_url, "meta-llama/Llama-3.3-70B-Instruct")
        assert server.engine.name == "vllm"
        # a request in flight: vLLM answers 200 {"success": false} and resets nothing; asked again until idle
        thread.state.running = 1
        threading.Timer(1.0, lambda: setattr(thread.state, "running", 0)).start()
        started = time.monotonic()
        assert server.reset_prefix_cache(wait_s=10, poll_s=0.1) == "POST /reset_prefix_cache"
        assert time.monotonic() - started >= 0.9
        events = thread.recorder.events
        assert (events[0]["status"], events[0]["done"]) == (200, False) and events[-1]["done"] is True
        thread.state.running = 1
        with pytest.raises(ServerError, match="answered HTTP 200"):
            server.reset_prefix_cache(wait_s=0.3, poll_s=0.1)
        thread.state.running = 0


def test_sglang_flush_asks_sglang_to_wait_for_idle_within_the_reset_wait(dataset):
    from e2e.engines.fake_engine import EngineProfile

    with ServerThread(dataset / "traces" / "tokenizer", profile=EngineProfile(flavour="sglang")) as thread:
        server = probe_server(thread.base_url, "meta-llama/Llama-3.3-70B-Instruct")
        assert server.engine.name == "sglang"
        # a request in flight: POST /flush_cache?timeout=S has SGLang wait for idle itself (without it: 400 at once)
        thread.state.running = 1
        threading.Timer(1.0, lambda: setattr(thread.state, "running", 0)).start()
        started = time.monotonic()
        assert server.reset_prefix_cache(wait_s=10, poll_s=0.1) == "POST /flush_cache"
        assert time.monotonic() - started >= 0.9
        assert [(e["status"], e["done"], e["timeout"]) for e in thread.recorder.events] == [(200, True, 10)]
        # still busy past the wait: SGLang's 400 ("Timed out waiting for idle state."); it never waits past wait_s
        thread.state.running = 1
        started = time.monotonic()
        with pytest.raises(ServerError, match=r"answered HTTP 400 \(Timed out waiting for idle state.\)"):
            server.reset_prefix_cache(wait_s=0.5, poll_s=0.1)
        assert time.monotonic() - started < 5
        refused = thread.recorder.events[1:]
        assert refused and all(e["status"] == 400 and e["timeout"] <= 0.5 for e in refused)
        thread.state.running = 0


def test_parse_metrics_keeps_the_engines_counters_and_gauges_summed_over_labels(dataset):
    from e2e.engines.fake_engine import EngineProfile, EngineState

    state = EngineState(EngineProfile(flavour="vllm", kv_capacity_tokens=1000), "m")
    state.cache.lookup_and_insert(list(range(40)))
    state.cache.lookup_and_insert(list(range(40)))
    text = state.metrics_text().decode()
    line = next(x for x in text.splitlines() if x.startswith("vllm:num_requests_running{"))
    text = text.replace(line, line + '\nvllm:num_requests_running{engine="1",model_name="other"} 2.0')  # a 2nd engine
    sample = parse_metrics(text, "vllm:")
    assert sample["vllm:prefix_cache_queries_total"] == 80 and sample["vllm:prefix_cache_hits_total"] == 32
    assert sample["vllm:num_requests_running"] == 2 and sample["vllm:kv_cache_usage_perc"] == pytest.approx(0.032)
    assert not any(name.endswith("_created") for name in sample)
    assert not any(
        name.startswith("python_") for name in parse_metrics("python_gc_objects_collected_total 3\n", "vllm:")
    )


def test_fake_sglang_exports_its_kv_usage_rounded_and_as_a_count_and_jitters_from_its_seed():
    from e2e.engines.fake_engine import EngineProfile, EngineState

    state = EngineState(EngineProfile(flavour="sglang", kv_capacity_tokens=10_000), "m")
    state.cache.lookup_and_insert(list(range(1234)))
    sample = parse_metrics(state.metrics_text().decode(), "sglang:")
    # 1,232 tokens of whole 16-token blocks in use: 12.32 %, exported as 0.12 (SGLang's round(usage, 2))
    assert sample["sglang:num_used_tokens"] == 1232 and sample["sglang:token_usage"] == 0.12
    draws = [
        [EngineState(EngineProfile(prefill_s_per_token=1e-3, jitter_s=0.01, seed=seed), "m").prefill_wait(10)]
        for seed in (1, 1, 2)
    ]
    assert draws[0] == draws[1] != draws[2] and all(d[0] > 0.01 for d in draws)  # 10 ms of prefill, then a draw
    many = EngineState(EngineProfile(jitter_s=0.01, seed=5), "m")
    assert statistics.mean(many.prefill_wait(0) for _ in range(4000)) == pytest.approx(0.01, rel=0.1)
    assert EngineState(EngineProfile(prefill_s_per_token=1e-3), "m").prefill_wait(10) == pytest.approx(0.01)


def test_select_configs_orders_by_scenario_and_load_and_takes_patterns(dataset):
    names = [c.name for c in select_configs(dataset / "configs")]
    assert names[:5] == ["scenario1/c1", "scenario1/c10", "scenario1/c25", "scenario1/c50", "scenario1/c100"]
    assert len(names) == 17
    picked = [c.name for c in select_configs(dataset / "configs", ["scenario3/*_noisy", "scenario2"])]
    assert picked == [
        "scenario2/c10_stagger",
        "scenario2/c10_sync",
        "scenario2/c25_stagger",
        "scenario2/c25_sync",
        "scenario2/c50_stagger",
        "scenario2/c50_sync",
        "scenario3/c100_noisy",
        "scenario3/c250_noisy",
        "scenario3/c500_noisy",
    ]
    with pytest.raises(OutputError, match="no config in .* matches 'scenario4'"):
        select_configs(dataset / "configs", ["scenario4"])


def test_run_config_loads_with_inference_perf_pointed_at_the_run(dataset, tmp_path):
    from inference_perf.config import read_config

    config = dataset / "configs" / "scenario1" / "c10.yml"
    text = run_config_text(
        config.read_text(),
        config_dir=config.parent,
        url="http://h:1",
        engine="sglang",
        report_dir=tmp_path / "run",
        outputs="recorded",
    )
    path = tmp_path / "run.yml"
    path.write_text(text)
    loaded = read_config(str(path))
    assert (loaded.server.base_url, loaded.server.type.value) == ("http://h:1", "sglang")
    assert loaded.storage.local_storage.path == (tmp_path / "run").as_posix()
    data_files = loaded.data.otel_trace_replay.hf_dataset_path["data_files"]
    assert Path(data_files) == (dataset / "traces" / "scenario1.jsonl").resolve()
    assert loaded.report.request_lifecycle.per_request is True
    assert os.path.isabs(loaded.tokenizer.pretrained_model_name_or_path)
    # --outputs recorded replays the trace's answers; the tool-call mode stays what the config said
    assert loaded.data.otel_trace_replay.disable_output_substitution is True
    assert loaded.data.otel_trace_replay.override_tool_call_max_tokens is True


def test_segments_split_the_engine_log_at_successful_resets():
    log = [
        {"t": 1, "body": {}},
        {"event": "reset", "done": True},
        {"t": 2},
        {"event": "reset", "done": False},
        {"t": 3},
        {"event": "reset", "done": True},
    ]
    assert segments(log) == [[{"t": 1, "body": {}}], [{"t": 2}, {"t": 3}], []]


def test_segments_leave_out_the_reset_probes_and_join_the_resets_of_one_verification():
    from fastgen.bakeoff.reset import PROBE_PROMPT

    probe = {"t": 0, "body": {"messages": [{"role": "user", "content": PROBE_PROMPT}]}}
    done = {"event": "reset", "done": True}
    log = [probe, probe, done, probe, done, {"t": 1}, probe, probe, done, probe, done, {"t": 2}]
    assert is_probe(probe) and not is_probe({"t": 1})
    assert segments(log) == [[], [{"t": 1}], [{"t": 2}]]


@pytest.mark.slow  # fastgen bakeoff (inference-perf) against fake engines
def test_bakeoff_readme_command_from_the_dataset_folder_completes(readme_dataset, tmp_path):
    # the bug: --out reports (relative) handed to inference-perf, which runs from the config's folder
    folder = shutil.copytree(readme_dataset, tmp_path / "data")
    with engine(readme_dataset, tmp_path) as server:
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "fastgen",
                "bakeoff",
                "--url",
                server.url,
                "--label",
                "vllm",
                "--configs",
                "scenario2/c10_sync",
            ],
            capture_output=True,
            text=True,
            timeout=600,
            cwd=folder,
        )
    assert result.returncode == 0, result.stdout + result.stderr
    run = folder / "reports" / "vllm" / "scenario2" / "c10_sync" / "repeat-1"
    record = json.loads((run / "run.json").read_text())
    assert record["status"] == "completed" and (run / "per_request_lifecycle_metrics.json").exists()
    assert "1 completed, 0 incomplete, 0 skipped (done before), 0 failed" in result.stdout
    # the config read its dataset file, and datasets kept its Arrow copy in the output folder, as the log line says
    cache = folder / "reports" / ".datasets-cache"
    assert any(cache.rglob("*.arrow")) and f"datasets' cache: {cache.resolve()}" in result.stderr


@pytest.mark.slow  # fastgen bakeoff (inference-perf) against fake engines
def test_bakeoff_resume_runs_again_when_the_dataset_changed(readme_dataset, tmp_path):
    folder = shutil.copytree(readme_dataset, tmp_path / "data")
    with engine(readme_dataset, tmp_path) as server:
        assert readme_bakeoff(folder, server.url, "--configs", QUICK).returncode == 0
        first = json.loads((folder / "reports" / "vllm" / QUICK / "repeat-1" / "run.json").read_text())
        with open(folder / "traces" / "manifest.json", "a") as manifest:
            manifest.write("\n")
        again = readme_bakeoff(folder, server.url, "--configs", QUICK)
    second = json.loads((folder / "reports" / "vllm" / QUICK / "repeat-1" / "run.json").read_text())
    assert again.returncode == 0 and "0 skipped" in again.stdout, again.stdout
    assert f"{QUICK}: running again (the dataset changed)" in again.stderr
    assert second["identity"]["dataset_sha256"] != first["identity"]["dataset_sha256"]
    assert second["started"] > first["started"]


def test_identity_change_names_what_makes_a_run_not_the_same(dataset, tmp_path):
    config = dataset / "configs" / "scenario2" / "c10_sync.yml"
    server = {
        "url": "http://a:1",
        "engine": "vllm",
        "version": "1",
        "model": MODEL,
        "kv_capacity_tokens": 1600,
        "block_size": 16,
        "gpus": None,
        "process_start": 1.0,
    }

    def identity(path: Path = config, outputs=None, reset=True, tool_choice=None, **changes) -> dict:
        import yaml

        text = run_config_text(
            path.read_text(),
            config_dir=config.parent,
            url="http://a:1",
            engine="vllm",
            report_dir=tmp_path / "run",
            outputs=outputs,
            tool_choice=tool_choice,
        )
        return run_identity({**server, **changes}, config_path=path, run_config=yaml.safe_load(text), reset=reset)

    edited = tmp_path / "c10_sync.yml"
    edited.write_text(config.read_text() + "# edited\n")
    base = identity()
    assert identity_change(base, identity(process_start=2.0, version="2")) is None  # a restart of the same server
    assert identity_change(base, identity(path=edited)) == "the config changed"
    assert identity_change(base, identity(kv_capacity_tokens=3200)) == "another KV capacity"
    assert identity_change(base, identity(outputs="recorded")) == "another outputs mode"
    assert identity_change(base, identity(tool_choice="as_recorded")) == "another tool_choice mode"
    assert identity_change(base, identity(url="http://b:1")) == "another server URL"
    assert identity_change(base, identity(reset=False)).startswith("the cache was reset between runs in one")
    # a capacity that could not be read this time (a /metrics that failed once) is not known, not another one
    assert identity_change(base, identity(kv_capacity_tokens=None)) is None
    assert identity_change(None, base) == "it was run by an older fastgen"
    assert base["outputs"] == "live" and base["tool_call_max_tokens"] == "floor" and len(base["dataset_sha256"]) == 64
    assert base["tool_choice"] == "forced"
    assert base["workload"] == "default" and base["reset"] is True


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


@pytest.mark.slow  # fastgen bakeoff (inference-perf) against fake engines
def test_bakeoff_reset_that_keeps_the_cache_stops_with_one_line(dataset, tmp_path):
    with engine(dataset, tmp_path, "vllm", "--reset-keeps-cache") as server:
        result = bakeoff(dataset, tmp_path, server.url, "--configs", QUICK)
        chats = [e for e in server.log() if "event" not in e]
    assert result.returncode == 1
    error = result.stderr.strip().splitlines()[-1]
    assert error.startswith(
        f"fastgen: error: POST /reset_prefix_cache at {server.url} answered but did not empty "
        f"the prefix cache: a probe prompt of "
    )
    assert "KV connector" in error and "--no-reset" in error
    # the check before the first config (three), the reset's probes (three): nothing replayed on a warm cache
    assert len(chats) == 6 and all(is_probe(e) for e in chats)
    assert not (tmp_path / "reports" / "x" / "scenario2" / "c10_sync" / "repeat-1").exists()


@pytest.mark.slow  # fastgen bakeoff (inference-perf) against fake engines
def test_bakeoff_refuses_a_label_whose_runs_came_from_another_server_unless_rerun(dataset, tmp_path):
    other = "http://127.0.0.1:9"
    old = tmp_path / "reports" / "x" / "scenario1" / "c1" / "repeat-1"
    old.mkdir(parents=True)
    write_run(
        old,
        RunRecord(
            config="scenario1/c1",
            status="completed",
            identity={"server": {"url": other, "engine": "vllm", "model": MODEL}},
        ),
    )
    with engine(dataset, tmp_path) as server:
        refused = bakeoff(dataset, tmp_path, server.url, "--configs", QUICK)
        assert refused.returncode == 1
        error = refused.stderr.strip()
        assert len(error.splitlines()) == 1 and error.startswith("fastgen: error: ")
        assert other in error and server.url in error and "--label" in error and "--rerun" in error
        assert not (tmp_path / "reports" / "x" / "scenario2").exists()
        went_on = bakeoff(dataset, tmp_path, server.url, "--configs", QUICK, "--rerun")
    assert went_on.returncode == 0 and run_record(tmp_path, QUICK)["identity"]["server"]["url"] == server.url


@pytest.mark.slow  # fastgen bakeoff (inference-perf) against fake engines
def test_bakeoff_repeats_each_config_after_a_verified_reset_with_the_asked_modes(dataset, tmp_path):
    with engine(dataset, tmp_path, "sglang") as server:
        result = bakeoff(
            dataset,
            tmp_path,
            server.url,
            "--configs",
            QUICK,
            "--repeat",
            "2",
            "--gpus",
            "8",
            "--outputs",
            "recorded",
            "--tool-call-max-tokens",
            "recorded",
        )
        log = server.log()
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 configs x 2 repeats: 2 completed" in result.stdout
    # the check before the first config (a tool-choice request, the probe twice); then each repeat: probe, probe,
    # reset, probe (no cached tokens: verified), reset, then the replay
    kinds = ["probe" if is_probe(e) else "reset" if e.get("event") == "reset" else "chat" for e in log]
    one = ["probe", "probe", "reset", "probe", "reset"] + ["chat"] * 12
    assert kinds == ["probe"] * 3 + one + one
    assert log[0]["body"]["tool_choice"]["function"]["name"] == "run_tests" and log[0]["body"]["stream"] is True
    assert log[0]["response"]["message"]["tool_calls"][0]["function"]["name"] == "run_tests"
    # SGLang waits for idle itself when asked: every flush asked it to
    assert all(0 < e["timeout"] <= 30 for e in log if e.get("event") == "reset")
    assert all(e["done"] for e in log if e.get("event") == "reset")
    assert [len(part) for part in segments(log)] == [0, 12, 12]
    for repeat in (1, 2):
        record = run_record(tmp_path, QUICK, repeat)
        assert (record["status"], record["repeat"], record["repeats"]) == ("completed", repeat, 2)
        assert record["reset"]["verified"] is True and record["reset"]["done"] == "POST /flush_cache"
        identity = record["identity"]
        assert (identity["outputs"], identity["tool_call_max_tokens"]) == ("recorded", "recorded")
        assert identity["server"]["gpus"] == 8 and identity["server"]["engine"] == "sglang"
        assert {k: identity["server"][k] for k in ("tool_choice_held", "cached_tokens_reported", "metrics_served")} == {
            "tool_choice_held": True,
            "cached_tokens_reported": True,
            "metrics_served": True,
        }
        run_config = (tmp_path / "reports" / "x" / QUICK / f"repeat-{repeat}" / "run-config.yml").read_text()
        assert "disable_output_substitution: true" in run_config
        assert "override_tool_call_max_tokens: false" in run_config


@pytest.mark.parametrize("flavour", ["vllm", "sglang"])
def test_server_identity_reads_version_capacity_and_process_start(dataset, flavour):
    from e2e.engines.fake_engine import VERSIONS, EngineProfile

    profile = EngineProfile(flavour=flavour, kv_capacity_tokens=4096)
    with ServerThread(dataset / "traces" / "tokenizer", profile=profile) as thread:
        server = probe_server(thread.base_url, MODEL)
        identity = server_identity(server, MODEL, gpus=2)
    # the scheduler's settings, in the engine's own names, from the endpoint that served them
    scheduler = identity.pop("scheduler")
    if flavour == "vllm":
        assert scheduler["source"] == "GET /server_info?config_format=json"
        assert (scheduler["block_size"], scheduler["policy"]) == (16, "fcfs")
    else:
        assert (scheduler["source"], scheduler["schedule_policy"]) == ("GET /get_server_info", "fcfs")
        assert scheduler["chunked_prefill_size"] == -1
    assert identity == {
        "url": thread.base_url,
        "engine": flavour,
        "version": VERSIONS[flavour],
        "model": MODEL,
        "kv_capacity_tokens": 4096,
        "block_size": 16,
        "gpus": 2,
        "process_start": thread.state.process_start,
    }


def test_wait_idle_raises_when_metrics_cannot_be_read():
    from http.server import BaseHTTPRequestHandler, HTTPServer

    class NoMetrics(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - http.server's name
            self.send_error(404)

        def log_message(self, *args):
            pass

    refused = LiveServer(f"http://127.0.0.1:{free_port()}", VLLM, (MODEL,))
    with pytest.raises(ServerError, match=r"cannot read .*/metrics to wait until the server is idle .*--no-reset"):
        wait_idle(refused, timeout_s=1)
    httpd = HTTPServer(("127.0.0.1", 0), NoMetrics)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        with pytest.raises(ServerError, match=r"answered HTTP 404\); start it with metrics on"):
            wait_idle(LiveServer(f"http://127.0.0.1:{httpd.server_port}", VLLM, (MODEL,)), timeout_s=1)
    finally:
        httpd.shutdown()


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


def test_fake_engine_fails_every_nth_request_and_scales_its_answers(dataset):
    from e2e.engines.fake_engine import EngineProfile
    from fastgen.bakeoff.server import fetch

    body = {"model": MODEL, "messages": [{"role": "user", "content": "hello there"}], "max_tokens": 40}
    for scale, tokens in ((1.0, 40), (0.5, 20), (0.01, 1)):
        profile = EngineProfile(fail_every=2, output_scale=scale)
        with ServerThread(dataset / "traces" / "tokenizer", profile=profile) as thread:
            url = thread.base_url + "/v1/chat/completions"
            first, second = (fetch(url, method="POST", json_body=body) for _ in range(2))
        assert (first.status, second.status) == (200, 500)
        assert json.loads(first.body)["usage"]["completion_tokens"] == tokens


def test_the_e2e_ceiling_check_holds_a_hit_to_its_band_where_the_report_shows_one():
    """e2e.bakeoff's check: within the tolerance of the point without a band, of the band with one (inference-perf's
    workers race turns released together: a run lands anywhere in the band, not on the point)."""
    from e2e.suites.bakeoff import _near_the_ceilings

    def table(hit_b: float, band: str | None) -> dict:
        columns = ["config", "hit % A", "hit % B", "ceiling % inf", "ceiling % cap"]
        row = ["scenario1/c10", {"value": 89.9}, {"value": hit_b}, 89.9, 81.6]
        if band is not None:
            columns.append("ceiling band % cap")
            row.append(band)
        return {"columns": columns, "rows": [row]}

    assert _near_the_ceilings(table(87.5, None)) == [
        "scenario1/c10: hit % B 87.5, analyze predicted 81.6 (ceiling % cap), more than 5.0 points from the point"
    ]
    assert _near_the_ceilings(table(87.5, "81.6-82.9")) == []
    assert _near_the_ceilings(table(75.0, "81.6-89.9")) == [
        "scenario1/c10: hit % B 75.0, analyze predicted 81.6 (ceiling % cap), more than 5.0 points from its band "
        "81.6-89.9"
    ]
