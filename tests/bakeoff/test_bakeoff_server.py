"""bakeoff/server.py: the live server over HTTP: which model it serves, reachable or not, started or still starting,
its prefix cache emptied (vLLM asked again until idle, SGLang asked to wait itself)."""

from __future__ import annotations

import threading
import time

import pytest
from _support.bakeoff import MODEL, QUICK, bakeoff, engine, run_record

from e2e.suites.run import free_port
from e2e.engines.server import ServerThread
from fastgen.bakeoff.sampler import parse_metrics
from fastgen.bakeoff.server import LiveServer, fetch, probe_server
from fastgen.engine_endpoints import VLLM
from fastgen.errors import ServerError


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
