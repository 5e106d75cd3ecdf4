"""bakeoff/reset.py: an empty prefix cache before each run and its proof: no reset endpoint, a reset that keeps the
cache, no /metrics to wait on."""

from __future__ import annotations

import threading

import pytest
from _support.bakeoff import MODEL, QUICK, bakeoff, engine, run_record

from e2e.suites.bakeoff import is_probe
from e2e.suites.run import free_port
from fastgen.bakeoff.reset import wait_idle
from fastgen.bakeoff.server import LiveServer
from fastgen.engine_endpoints import VLLM
from fastgen.errors import ServerError


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
