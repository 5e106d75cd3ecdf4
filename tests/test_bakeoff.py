"""`fastgen bakeoff` and `fastgen compare` as a user runs them: real processes, the real inference-perf, fake engines
on loopback (e2e/fake_engine.py) that log every request and reset.

The first test is the e2e bakeoff on two configs (e2e/bakeoff.py runs six with `make e2e`); the others each break
one thing a live bakeoff meets: a server that dies mid-config, the wrong model, no reset endpoint, a busy SGLang,
an unreachable URL, a rerun, Ctrl-C.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from e2e.bakeoff import FakeEngineProcess, fastgen_command, run_fake_bakeoff, segments
from e2e.run import Dataset, free_port, generate
from e2e.server import ServerThread
from fastgen.bakeoff.plan import run_config_text, select_configs
from fastgen.bakeoff.sampler import parse_metrics
from fastgen.bakeoff.server import probe_server
from fastgen.errors import OutputError, ServerError

ROOT = Path(__file__).resolve().parent.parent
QUICK = "scenario2/c10_sync"  # 12 requests, about 6 s


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> Path:
    workdir = tmp_path_factory.mktemp("bakeoff-data")
    generate(workdir, "http://127.0.0.1:9", Dataset())
    return workdir


def engine(dataset: Path, tmp_path: Path, flavour: str = "vllm", *extra: str, **kwargs) -> FakeEngineProcess:
    return FakeEngineProcess(dataset / "traces" / "tokenizer", tmp_path / "engine.jsonl", flavour,
                             extra=tuple(extra), **kwargs)


def bakeoff(dataset: Path, tmp_path: Path, url: str, *args: str) -> subprocess.CompletedProcess:
    return fastgen_command("bakeoff", "--url", url, "--label", "x", "--config-dir", str(dataset / "configs"),
                           "--out", str(tmp_path / "reports"), "--scrape-interval", "0.5", *args, timeout_s=600)


def run_record(tmp_path: Path, name: str) -> dict:
    return json.loads((tmp_path / "reports" / "x" / name / "run.json").read_text())


def test_bakeoff_on_two_engines_then_compare_shows_what_the_engines_logged(tmp_path):
    failures = run_fake_bakeoff(tmp_path, ["scenario1/c10", "scenario3/c100_noisy"])
    assert failures == []
    report = (tmp_path / "report" / "report.md").read_text()
    assert "## Scenario 1" in report and "## Scenario 3" in report and "| scenario3/c100_noisy |" in report


def test_bakeoff_skips_a_completed_config_unless_rerun(dataset, tmp_path):
    with engine(dataset, tmp_path) as server:
        assert bakeoff(dataset, tmp_path, server.url, "--configs", QUICK).returncode == 0
        first = run_record(tmp_path, QUICK)
        again = bakeoff(dataset, tmp_path, server.url, "--configs", QUICK)
        assert again.returncode == 0 and "1 skipped" in again.stdout
        assert run_record(tmp_path, QUICK) == first
        assert bakeoff(dataset, tmp_path, server.url, "--configs", QUICK, "--rerun").returncode == 0
        resets = [e for e in server.log() if e.get("event") == "reset"]
    assert len(resets) == 2 and run_record(tmp_path, QUICK)["started"] > first["started"]
    assert first["status"] == "completed" and first["reset"] == "POST /reset_prefix_cache"
    assert first["metrics_samples"] >= 2 and first["engine"] == "vllm"


def test_bakeoff_server_that_dies_mid_config_fails_it_and_stops(dataset, tmp_path):
    with engine(dataset, tmp_path, "vllm", "--die-after", "3") as server:
        result = bakeoff(dataset, tmp_path, server.url, "--configs", QUICK, "scenario1/c1")
    assert result.returncode == 1
    # the design's order: scenario 1 first
    assert "scenario1/c1: the server stopped answering during the run" in result.stdout
    assert "scenario2/c10_sync: not run: the server stopped answering" in result.stdout
    record = run_record(tmp_path, "scenario1/c1")
    assert record["status"] == "failed" and record["metrics_errors"] >= 1
    assert not (tmp_path / "reports" / "x" / "scenario2").exists()


def test_bakeoff_against_another_model_names_both(dataset, tmp_path):
    with engine(dataset, tmp_path, "vllm", "--model", "Qwen/Qwen3-32B") as server:
        result = bakeoff(dataset, tmp_path, server.url)
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1] == (
        f"fastgen: error: {server.url} serves Qwen/Qwen3-32B, the configs ask for meta-llama/Llama-3.3-70B-Instruct; "
        f"start the server with --served-model-name meta-llama/Llama-3.3-70B-Instruct, or regenerate the configs "
        f"with --model Qwen/Qwen3-32B")
    assert not (tmp_path / "reports").exists()


def test_bakeoff_without_a_reset_endpoint_says_how_to_get_one_or_go_on(dataset, tmp_path):
    with engine(dataset, tmp_path, "vllm", "--no-reset-endpoint") as server:
        refused = bakeoff(dataset, tmp_path, server.url, "--configs", QUICK)
        error = refused.stderr.strip().splitlines()[-1]
        assert refused.returncode == 1 and error.startswith(f"fastgen: error: {server.url} has no POST "
                                                            f"/reset_prefix_cache (HTTP 404): vLLM serves")
        assert "VLLM_SERVER_DEV_MODE=1" in error and "--no-reset" in error
        assert not (tmp_path / "reports" / "x" / "scenario2").exists() or not any(
            (tmp_path / "reports" / "x" / "scenario2").iterdir())
        went_on = bakeoff(dataset, tmp_path, server.url, "--configs", QUICK, "--no-reset")
    assert went_on.returncode == 0 and run_record(tmp_path, QUICK)["reset"] == "none (--no-reset)"


def test_bakeoff_warns_when_the_server_hits_its_cache_but_reports_no_cached_tokens(dataset, tmp_path):
    with engine(dataset, tmp_path, "vllm", "--no-cache-report") as server:
        result = bakeoff(dataset, tmp_path, server.url, "--configs", QUICK)
    assert result.returncode == 0
    warning = ("the server hit its prefix cache but reported no cached tokens; restart it with "
               "--enable-prompt-tokens-details or every hit ratio reads 0")
    assert warning in result.stderr and run_record(tmp_path, QUICK)["warning"] == warning


def test_bakeoff_unreachable_url_is_one_line(dataset, tmp_path):
    url = f"http://127.0.0.1:{free_port()}"
    result = bakeoff(dataset, tmp_path, url)
    assert result.returncode == 1
    assert result.stderr.strip() == f"fastgen: error: cannot reach {url}: Connection refused; start the server, or fix --url"


def test_bakeoff_ctrl_c_keeps_finished_runs_and_leaves_no_partial_run(dataset, tmp_path):
    with engine(dataset, tmp_path) as server:
        command = [sys.executable, "-m", "fastgen", "bakeoff", "--url", server.url, "--label", "x", "--config-dir",
                   str(dataset / "configs"), "--out", str(tmp_path / "reports"), "--configs", QUICK, "scenario1/c10"]
        proc = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        partial = tmp_path / "reports" / "x" / "scenario2" / "c10_sync.partial"  # the second, after scenario1/c10
        deadline = time.monotonic() + 120
        while not (partial / "inference-perf.log").exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(2)
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr
    assert run_record(tmp_path, "scenario1/c10")["status"] == "completed"
    assert not partial.exists() and not (tmp_path / "reports" / "x" / "scenario2" / "c10_sync").exists()


@pytest.mark.parametrize("flavour, busy_status", [("sglang", 400), ("vllm", 200)])
def test_reset_waits_until_the_server_is_idle(dataset, flavour, busy_status):
    from e2e.fake_engine import EngineProfile

    with ServerThread(dataset / "traces" / "tokenizer", profile=EngineProfile(flavour=flavour)) as thread:
        server = probe_server(thread.base_url, "meta-llama/Llama-3.3-70B-Instruct")
        assert server.engine.name == flavour
        # a request in flight: SGLang answers 400 to /flush_cache, vLLM 200 {"success": false}; neither resets
        thread.state.running = 1
        threading.Timer(1.0, lambda: setattr(thread.state, "running", 0)).start()
        started = time.monotonic()
        assert server.reset_prefix_cache(wait_s=10, poll_s=0.1) == f"POST {server.engine.reset_path}"
        assert time.monotonic() - started >= 0.9
        events = thread.recorder.events
        assert (events[0]["status"], events[0]["done"]) == (busy_status, False) and events[-1]["done"] is True
        thread.state.running = 1
        with pytest.raises(ServerError, match=f"answered HTTP {busy_status}"):
            server.reset_prefix_cache(wait_s=0.3, poll_s=0.1)
        thread.state.running = 0


def test_parse_metrics_keeps_the_engines_counters_and_gauges_summed_over_labels(dataset):
    from e2e.fake_engine import EngineProfile, EngineState

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
    assert not any(name.startswith("python_") for name in parse_metrics("python_gc_objects_collected_total 3\n",
                                                                          "vllm:"))


def test_select_configs_orders_by_scenario_and_load_and_takes_patterns(dataset):
    names = [c.name for c in select_configs(dataset / "configs")]
    assert names[:5] == ["scenario1/c1", "scenario1/c10", "scenario1/c25", "scenario1/c50", "scenario1/c100"]
    assert len(names) == 17
    picked = [c.name for c in select_configs(dataset / "configs", ["scenario3/*_noisy", "scenario2"])]
    assert picked == ["scenario2/c10_stagger", "scenario2/c10_sync", "scenario2/c25_stagger", "scenario2/c25_sync",
                      "scenario2/c50_stagger", "scenario2/c50_sync", "scenario3/c100_noisy", "scenario3/c250_noisy",
                      "scenario3/c500_noisy"]
    with pytest.raises(OutputError, match="no config in .* matches 'scenario4'"):
        select_configs(dataset / "configs", ["scenario4"])


def test_run_config_loads_with_inference_perf_pointed_at_the_run(dataset, tmp_path):
    from inference_perf.config import read_config

    config = dataset / "configs" / "scenario1" / "c10.yml"
    text = run_config_text(config.read_text(), config_dir=config.parent, url="http://h:1", engine="sglang",
                           report_dir=tmp_path / "run")
    path = tmp_path / "run.yml"
    path.write_text(text)
    loaded = read_config(str(path))
    assert (loaded.server.base_url, loaded.server.type.value) == ("http://h:1", "sglang")
    assert loaded.storage.local_storage.path == (tmp_path / "run").as_posix()
    assert Path(loaded.data.otel_trace_replay.trace_directory) == (dataset / "traces" / "scenario1").resolve()
    assert loaded.report.request_lifecycle.per_request is True
    assert os.path.isabs(loaded.tokenizer.pretrained_model_name_or_path)


def test_segments_split_the_engine_log_at_successful_resets():
    log = [{"t": 1, "body": {}}, {"event": "reset", "done": True}, {"t": 2}, {"event": "reset", "done": False},
           {"t": 3}, {"event": "reset", "done": True}]
    assert segments(log) == [[{"t": 1, "body": {}}], [{"t": 2}, {"t": 3}], []]
