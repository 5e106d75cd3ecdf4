"""e2e.real.router and e2e.suites.bakeoff_router with the real vllm-router 0.1.17 in front of fake engines: what the
router serves, lists, counts and hands on; then the whole bakeoff through it, once per policy, checked against each
replica's log, its counters and the router's own counts.

Skipped unless FASTGEN_ROUTER_VENV names a venv where e2e.real.router.install() has finished (`make e2e-router` makes
one; so does `python -m e2e.real.router --venv DIR ...`, about 20 s): `FASTGEN_ROUTER_VENV=.e2e-router/venv
.venv/bin/python -m pytest tests/test_e2e_router.py`.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from e2e.suites.bakeoff import FakeEngineProcess
from e2e.suites.bakeoff_router import run_router_bakeoff
from e2e.real.router import INSTALL_MARKER, RouterProcess, install
from fastgen.bakeoff.server import fetch

VENV = os.environ.get("FASTGEN_ROUTER_VENV")
pytestmark = pytest.mark.skipif(
    not VENV or not (Path(VENV) / INSTALL_MARKER).exists(),
    reason="FASTGEN_ROUTER_VENV does not point at a venv installed by e2e.real.router.install()",
)
MODEL = "meta-llama/Llama-3.3-70B-Instruct"
TOKENIZER = Path(__file__).resolve().parents[1] / "fastgen" / "data" / "builtin-tokenizer"


def test_the_router_lists_its_workers_counts_what_it_sends_and_hands_metrics_to_one(tmp_path):
    router_bin = install(Path(VENV))  # at once: the marker is there
    with (
        FakeEngineProcess(TOKENIZER, tmp_path / "a.jsonl", "vllm") as a,
        FakeEngineProcess(TOKENIZER, tmp_path / "b.jsonl", "vllm") as b,
        RouterProcess(router_bin, [a.url, b.url], policy="round_robin", log=tmp_path / "router.log") as router,
    ):
        listed = json.loads(fetch(router.base_url + "/list_workers").body)["urls"]
        workers = [w["url"] for w in json.loads(fetch(router.base_url + "/workers").body)["workers"]]
        body = {"model": MODEL, "messages": [{"role": "user", "content": "hello there"}], "max_tokens": 1}
        for _ in range(4):
            assert fetch(router.base_url + "/v1/chat/completions", method="POST", json_body=body).status == 200
        routed = router.routed()
        metrics = fetch(router.base_url + "/metrics").body.decode()
        logged = [sum(1 for line in e.record.read_text().splitlines() if '"body"' in line) for e in (a, b)]
    assert sorted(listed) == sorted(workers) == sorted([a.url, b.url])
    assert routed == {a.url: 2.0, b.url: 2.0} and logged == [2, 2]
    # a path it does not know goes to one worker: /metrics is one engine's, which is why the bakeoff needs replicas
    assert "vllm:prefix_cache_queries_total" in metrics and "vllm_router" not in metrics


@pytest.mark.slow  # the same, through a real router (when one is installed)
def test_bakeoff_through_the_router_counts_what_each_replica_served(tmp_path):
    assert run_router_bakeoff(tmp_path, "fake", Path(VENV), None) == []
    report = (tmp_path / "report" / "report.md").read_text()
    assert "## Replicas" in report
    assert "| router (policy, replicas) | round_robin, 2 replicas | cache_aware, 2 replicas |" in report
    # compare's ceilings are each fleet's: analyze for the replicas behind the policy each side's runs recorded
    assert "ceilings for 2 replicas behind round_robin" in report and "--replicas 2 --router cache_aware" in report
