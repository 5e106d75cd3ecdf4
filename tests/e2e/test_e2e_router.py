"""e2e.real.router and e2e.suites.bakeoff_router with the real vllm-router 0.1.17 in front of fake engines: what the
router serves, lists, counts and hands on; docs/router.md's vllm-router and sglang-router command lines, as written
there, each in front of the other engine's fake replicas; then the whole bakeoff through it, once per policy, checked
against each replica's log, its counters and the router's own counts.

Skipped unless FASTGEN_ROUTER_VENV names a venv where e2e.real.router.install() has finished (`make e2e-router` makes
one; so does `python -m e2e.real.router --venv DIR ...`, about 20 s): `FASTGEN_ROUTER_VENV=.e2e-router/venv
.venv/bin/python -m pytest tests/e2e/test_e2e_router.py`.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from _support import ROOT
from e2e.suites.bakeoff import FakeEngineProcess
from e2e.suites.bakeoff_router import run_router_bakeoff
from e2e.real.router import INSTALL_MARKER, RouterProcess, install
from fastgen.bakeoff.fleet import listed_replicas, policy_in_metrics
from fastgen.bakeoff.server import fetch, probe_server
from fastgen.errors import ServerError
from _support.docs import _fenced_commands, _words

VENV = os.environ.get("FASTGEN_ROUTER_VENV")
pytestmark = pytest.mark.skipif(
    not VENV or not (Path(VENV) / INSTALL_MARKER).exists(),
    reason="FASTGEN_ROUTER_VENV does not point at a venv installed by e2e.real.router.install()",
)
MODEL = "meta-llama/Llama-3.3-70B-Instruct"
TOKENIZER = ROOT / "fastgen" / "data" / "builtin-tokenizer"


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


DOC = ROOT / "docs" / "router.md"
# what the test puts in place of the doc's hosts and ports: this machine's loopback
LOOPBACK = ("--host", "--prometheus-host", "--port", "--prometheus-port", "--worker-urls")


def _documented(router: str) -> list[str]:
    """The words of docs/router.md's one command line that starts `router`, as a user types it."""
    found = [words for c in _fenced_commands(DOC) if (words := _words(c)) and Path(words[0]).name == router]
    assert len(found) == 1, f"docs/router.md has {len(found)} command lines starting {router}"
    return found[0]


class AsDocumented(RouterProcess):
    """A router started with the doc's command line: the venv's executable for its first word, the fake engines for
    its --worker-urls, loopback hosts and free ports for its --host, --port and Prometheus ones; every other word
    (the subcommand, the policy) as written."""

    def __init__(self, words: list[str], workers: list[str], log: Path) -> None:
        missing = [flag for flag in LOOPBACK if flag not in words]
        assert missing == [], f"docs/router.md's {words[0]} command lacks {missing}"
        executable = Path(VENV) / "bin" / Path(words[0]).name
        super().__init__(executable, workers, policy=words[words.index("--policy") + 1], log=log)
        self.words = words

    def command(self) -> list[str]:
        here = {"--host": "127.0.0.1", "--prometheus-host": "127.0.0.1", "--port": str(self.port)}
        here["--prometheus-port"] = str(self.metrics_port)
        words, command, i = self.words, [str(self.executable)], 1
        while i < len(words):
            command.append(words[i])
            i += 1
            if command[-1] in here:
                command.append(here[command[-1]])
                i += 1
            elif command[-1] == "--worker-urls":
                command += self.workers
                while i < len(words) and not words[i].startswith("--"):  # the doc's hosts
                    i += 1
        return command


def _engine_seen(url: str) -> str:
    """The engine the bakeoff tells at `url` without --engine, or the line it stops with."""
    try:
        return probe_server(url, MODEL).engine.name
    except ServerError as exc:
        return str(exc)


# (router, the fake replicas' engine, what the bakeoff tells through it without --engine), as docs/router.md says:
# SGLang is found through vllm-router; sglang-router answers /v1/models itself, so SGLang behind it needs --engine,
# and it names vLLM replicas' model `unknown` (it learns the model from SGLang's /get_server_info)
CROSSED = [
    ("vllm-router", "sglang", "sglang"),
    ("sglang-router", "sglang", "pass --engine vllm or --engine sglang"),
    ("sglang-router", "vllm", "serves unknown, the configs ask for"),
]


@pytest.mark.parametrize("router, engine, seen", CROSSED)
def test_the_docs_router_command_routes_to_its_replicas_as_the_doc_says(tmp_path, router, engine, seen):
    """docs/router.md's command for each router, in front of two fake replicas: it lists them where the bakeoff
    looks, routes the requests sent through it to them, its metrics name the doc's policy, and the bakeoff tells
    the engine through it (or stops) as the doc says."""
    with (
        FakeEngineProcess(TOKENIZER, tmp_path / "a.jsonl", engine) as a,
        FakeEngineProcess(TOKENIZER, tmp_path / "b.jsonl", engine) as b,
        AsDocumented(_documented(router), [a.url, b.url], tmp_path / "router.log") as started,
    ):
        listed, where = listed_replicas(started.base_url)
        body = {"model": MODEL, "messages": [{"role": "user", "content": "hello there"}], "max_tokens": 1}
        answers = [fetch(started.base_url + "/v1/chat/completions", method="POST", json_body=body) for _ in range(4)]
        policies = policy_in_metrics(started.metrics_url)
        told = _engine_seen(started.base_url)
        logged = [sum(1 for line in e.record.read_text().splitlines() if '"body"' in line) for e in (a, b)]
    assert (sorted(listed), where) == (sorted([a.url, b.url]), "GET /workers")
    assert [answer.status for answer in answers] == [200] * 4
    assert policies == [started.policy] and seen in told
    assert logged == [2, 2] if started.policy == "round_robin" else sum(logged) == 4


@pytest.mark.slow  # the same, through a real router (when one is installed)
def test_bakeoff_through_the_router_counts_what_each_replica_served(tmp_path):
    assert run_router_bakeoff(tmp_path, "fake", Path(VENV), None) == []
    report = (tmp_path / "report" / "report.md").read_text()
    assert "## Replicas" in report
    assert "| router (policy, replicas) | round_robin, 2 replicas | cache_aware, 2 replicas |" in report
    # compare's ceilings are each fleet's: analyze for the replicas behind the policy each side's runs recorded
    assert "ceilings for 2 replicas behind round_robin" in report and "--replicas 2 --router cache_aware" in report
