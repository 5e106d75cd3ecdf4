"""An engine behind a router (fastgen/bakeoff/fleet.py): the replicas found, checked, reset, sampled and counted one
by one, and each way a fleet is refused in one line. Fake engines on loopback (e2e/engines/fake_engine.py) stand for the
replicas; a small HTTP server answers as vllm-router 0.1.17 answers its listings and metrics (seen 2026-12-04). The
real router in front of fake and real engines: tests/e2e/test_e2e_router.py and `make e2e-router`.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest
from _support.bakeoff import bakeoff, run_record

from e2e.suites.bakeoff import FakeEngineProcess
from e2e.suites.run import Dataset, generate
from fastgen.bakeoff.fleet import Fleet, listed_replicas, open_fleet, policy_in_metrics
from fastgen.bakeoff.server import LiveServer, probe_server
from fastgen.engine_endpoints import VLLM
from fastgen.errors import ServerError

MODEL = "meta-llama/Llama-3.3-70B-Instruct"
QUICK = "scenario2/c10_sync"
# what vllm-router 0.1.17 answered (trimmed to what is read)
ROUTER_METRICS = """\
# TYPE vllm_router_policy_decisions_total counter
vllm_router_policy_decisions_total{policy="cache_aware",worker="http://127.0.0.1:36529"} 6
# TYPE vllm_router_processed_requests_total counter
vllm_router_processed_requests_total{worker="http://127.0.0.1:36529"} 6
# TYPE vllm_router_active_workers gauge
vllm_router_active_workers 2
"""

# what sglang-router 0.3.2 answered (2026-12-06): its decision counter is another family, the policy the same label
SGLANG_ROUTER_METRICS = """\
# TYPE smg_worker_selection_total counter
smg_worker_selection_total{worker_type="regular",connection_mode="http",model="m",policy="round_robin"} 4
# TYPE smg_http_requests_total counter
smg_http_requests_total{method="GET",path="/workers"} 1
"""


class FakeRouter:
    """A loopback HTTP server that answers GET paths with fixed JSON or text, as a router's listings and metrics."""

    def __init__(self, answers: dict[str, tuple[int, str]]) -> None:
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 - http.server's name
                status, body = outer.answers.get(self.path, (404, "404: Not Found"))
                data = body.encode()
                self.send_response(status)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.answers = answers
        self.httpd = HTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.httpd.server_port}"

    def __enter__(self) -> "FakeRouter":
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> Path:
    workdir = tmp_path_factory.mktemp("fleet-data")
    generate(workdir, "http://127.0.0.1:9", Dataset())
    return workdir


def engine(dataset: Path, folder: Path, name: str, *extra: str) -> FakeEngineProcess:
    return FakeEngineProcess(dataset / "traces" / "tokenizer", folder / f"{name}.jsonl", "vllm", extra=tuple(extra))


def test_listed_replicas_reads_both_listings_a_router_answers():
    workers = {"workers": [{"url": "http://b:8000/", "is_healthy": True}, {"url": "http://a:8000"}], "total": 2}
    with FakeRouter({"/workers": (200, json.dumps(workers))}) as router:
        assert listed_replicas(router.url) == (["http://b:8000", "http://a:8000"], "GET /workers")
    with FakeRouter({"/workers": (404, ""), "/list_workers": (200, '{"urls": ["http://a:1"]}')}) as router:
        assert listed_replicas(router.url) == (["http://a:1"], "GET /list_workers")
    with FakeRouter({"/workers": (200, "not json"), "/list_workers": (200, '{"urls": []}')}) as router:
        assert listed_replicas(router.url) == ([], None)


def test_policy_in_metrics_reads_the_routers_decision_counter():
    with FakeRouter({"/metrics": (200, ROUTER_METRICS)}) as router:
        assert policy_in_metrics(router.url + "/metrics") == ["cache_aware"]
    with FakeRouter({"/metrics": (200, SGLANG_ROUTER_METRICS)}) as router:
        assert policy_in_metrics(router.url + "/metrics") == ["round_robin"]
        with pytest.raises(ServerError) as missing:
            policy_in_metrics(router.url + "/nothing")
    assert str(missing.value) == f"GET {router.url}/nothing answered HTTP 404; fix --router-metrics"


# the replicas the quick tests share (started once: a fake engine takes seconds to load its tokenizer)
ENGINES = {"a": (), "b": (), "no-report": ("--no-cache-report",), "keeps": ("--reset-keeps-cache",)}
# replicas that fail before any chat request is sent to them: a server that answers /v1/models alone is enough
MODELS = '{"object": "list", "data": [{"id": "%s", "object": "model", "owned_by": "vllm"}]}'


@pytest.fixture(scope="module")
def engines(dataset, tmp_path_factory):
    folder = tmp_path_factory.mktemp("engines")
    started: dict[str, FakeEngineProcess] = {}
    threads = [
        threading.Thread(target=lambda n=name, x=extra: started.__setitem__(n, engine(dataset, folder, n, *x)))
        for name, extra in ENGINES.items()
    ]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert sorted(started) == sorted(ENGINES)
        with FakeRouter({"/v1/models": (200, MODELS % "other")}) as other:
            with FakeRouter({"/v1/models": (200, MODELS % MODEL)}) as no_metrics:
                yield {**started, "other": other, "no-metrics": no_metrics}
    finally:
        for process in started.values():
            process.stop()


def test_a_server_without_a_router_is_a_fleet_of_one(engines):
    server = probe_server(engines["a"].url, MODEL)
    fleet = open_fleet(server, MODEL)
    assert fleet == Fleet.single(server) and not fleet.routed and fleet.describe() == ""
    assert fleet.router_identity(MODEL) is None and fleet.figures({}, {}) is None


def test_open_fleet_refuses_each_fleet_it_cannot_measure_in_one_line(engines):
    a, other = engines["a"], engines["other"]
    front = probe_server(a.url, MODEL)
    cases = {
        "unreachable": (dict(replicas=("http://127.0.0.1:9",), policy="round_robin"), "does not answer"),
        "twice": (dict(replicas=(a.url, a.url + "/"), policy="round_robin"), "is given twice"),
        "other model": (dict(replicas=(a.url, other.url), policy="round_robin"), "the configs ask for"),
        "no policy": (dict(replicas=(a.url,)), "cannot tell the routing policy"),
        "hidden": (dict(policy="cache_aware"), "lists no replicas"),
    }
    said = {}
    for case, (kwargs, _) in cases.items():
        with pytest.raises(ServerError) as refused:
            open_fleet(front, MODEL, **kwargs)
        said[case] = str(refused.value)
    for case, (_, words) in cases.items():
        assert words in said[case] and "\n" not in said[case], case
    assert said["unreachable"].startswith("replica http://127.0.0.1:9 does not answer (")
    assert said["unreachable"].endswith(f"start it, or give the replicas behind {a.url} with --replica URL")
    assert said["hidden"] == (
        f"the router at {a.url} lists no replicas (GET /workers, GET /list_workers): pass each replica's base URL "
        f"with --replica URL"
    )
    assert said["no policy"].endswith("or --router-metrics URL (its Prometheus endpoint)")


@pytest.mark.parametrize("name, words", [("no-metrics", "serves no /metrics"), ("no-report", "got no cached tokens")])
def test_a_replica_that_cannot_be_counted_or_verified_stops_the_check(engines, name, words):
    a, b = engines["a"], engines[name]
    fleet = open_fleet(probe_server(a.url, MODEL), MODEL, replicas=(a.url, b.url), policy="round_robin")
    with pytest.raises(ServerError) as stopped:
        fleet.check(MODEL, tool_check=False)
    assert str(stopped.value).startswith(f"replica {b.url}") and words in str(stopped.value)
    assert "restart it with" in str(stopped.value)


def test_a_replica_whose_reset_keeps_the_cache_stops_the_reset(engines):
    a, b = engines["a"], engines["keeps"]
    fleet = open_fleet(probe_server(a.url, MODEL), MODEL, replicas=(b.url, a.url), policy="round_robin")
    with pytest.raises(ServerError) as kept:
        fleet.reset(MODEL)
    assert f"POST /reset_prefix_cache at {b.url} answered but did not empty the prefix cache" in str(kept.value)


def test_fleet_reset_sample_and_figures_count_each_replica(engines):
    a, b = engines["a"], engines["b"]
    fleet = open_fleet(probe_server(a.url, MODEL), MODEL, replicas=(b.url, a.url), policy="round_robin")
    assert [r.url for r in fleet.replicas] == sorted([a.url, b.url]) and fleet.routed
    reset = fleet.reset(MODEL)
    first = fleet.sample()
    body = {"model": MODEL, "messages": [{"role": "user", "content": "one two three " * 50}], "max_tokens": 2}
    for _ in range(2):  # the second finds the first's prefix cached, on replica a only
        fastgen_post(a.url, body)
    last = fleet.sample()
    figures = fleet.figures(first, last)
    log = [json.loads(line) for line in a.record.read_text().splitlines()]
    assert reset["verified"] is True and [r["url"] for r in reset["replicas"]] == [r.url for r in fleet.replicas]
    assert all(r["verified"] is True for r in reset["replicas"])
    answered = [e["response"]["usage"] for e in log if "body" in e and e["body"] == body][-2:]
    by_url = {row["url"]: row for row in figures["replicas"]}
    assert by_url[a.url] == {
        "url": a.url,
        "requests": 2,
        "prompt_tokens": sum(u["prompt_tokens"] for u in answered),
        "cached_tokens": sum((u.get("prompt_tokens_details") or {}).get("cached_tokens") or 0 for u in answered),
    }
    assert by_url[a.url]["cached_tokens"] > 0
    assert by_url[b.url] == {"url": b.url, "requests": 0, "prompt_tokens": 0, "cached_tokens": 0}
    assert figures["sum"] == {k: by_url[a.url][k] for k in ("requests", "prompt_tokens", "cached_tokens")}
    # the fleet's sample: counters summed over the replicas, KV usage weighted by their capacities (equal here)
    each = last["replicas"]
    assert last["metrics"]["vllm:prompt_tokens_total"] == sum(m["vllm:prompt_tokens_total"] for m in each.values())
    usage = [m["vllm:kv_cache_usage_perc"] for m in each.values()]
    assert last["metrics"]["vllm:kv_cache_usage_perc"] == pytest.approx(sum(usage) / 2)


def fastgen_post(url: str, body: dict) -> None:
    from fastgen.bakeoff.server import fetch

    assert fetch(url + "/v1/chat/completions", method="POST", json_body=body).status == 200


@pytest.mark.slow  # the same, with replicas
def test_bakeoff_with_replicas_records_each_replicas_figures_and_the_policy(dataset, tmp_path):
    # no router here: --url is one replica, so the other serves nothing; the real router: test_e2e_router.py
    with engine(dataset, tmp_path, "a") as a, engine(dataset, tmp_path, "b") as b:
        result = bakeoff(
            dataset, tmp_path, a.url, "--configs", QUICK, "--replica", a.url, "--replica", b.url, "--router-policy", "p"
        )
        logs = {e.url: [json.loads(line) for line in e.record.read_text().splitlines()] for e in (a, b)}
    assert result.returncode == 0, result.stdout + result.stderr
    assert "a router (p) in front of 2 replicas (from --replica)" in result.stderr
    record = run_record(tmp_path, QUICK)
    assert record["status"] == "completed"
    assert record["identity"]["router"]["policy"] == "p"
    assert record["identity"]["router"]["replica_urls"] == sorted([a.url, b.url])
    assert record["identity"]["server"]["kv_capacity_tokens"] == sum(
        r["kv_capacity_tokens"] for r in record["identity"]["router"]["replicas"]
    )
    assert [r["verified"] for r in record["reset"]["replicas"]] == [True, True]
    replay = [e for e in logs[a.url] if "body" in e and not e["body"]["messages"][0]["content"].startswith("fastgen")]
    replay = replay[-record["requests"]["recorded"] :]  # this run's: the last ones a answered
    by_url = {row["url"]: row for row in record["fleet"]["replicas"]}
    assert by_url[a.url]["requests"] == record["requests"]["recorded"] == len(replay)
    assert by_url[a.url]["prompt_tokens"] == sum(e["response"]["usage"]["prompt_tokens"] for e in replay)
    assert by_url[b.url] == {"url": b.url, "requests": 0, "prompt_tokens": 0, "cached_tokens": 0}
    lines = [json.loads(line) for line in (tmp_path / "reports" / "x" / QUICK / "repeat-1" / "metrics.jsonl").open()]
    assert lines and all(sorted(line["replicas"]) == sorted([a.url, b.url]) for line in lines)


@pytest.mark.slow  # the same, with replicas
def test_bakeoff_with_replicas_fails_the_run_when_a_replica_restarts(dataset, tmp_path):
    # --url's replica answers two probes and the tool check, then three probes verify its reset: a restart after its
    # ninth answered request falls inside the replay, which goes to it alone
    with engine(dataset, tmp_path, "a", "--restart-after", "9") as a, engine(dataset, tmp_path, "b") as b:
        result = bakeoff(
            dataset, tmp_path, a.url, "--configs", QUICK, "--replica", a.url, "--replica", b.url, "--router-policy", "p"
        )
    assert result.returncode == 1
    record = run_record(tmp_path, QUICK)
    assert record["status"] == "failed"
    assert record["reason"] == (
        f"the server restarted during the run (replica {a.url}: its process start time changed)"
    )


@pytest.mark.slow  # the same, with replicas
def test_bakeoff_with_replicas_fails_the_run_and_stops_when_a_replica_stops_answering(dataset, tmp_path):
    with engine(dataset, tmp_path, "a") as a, engine(dataset, tmp_path, "b") as b:
        command = [
            sys.executable,
            "-m",
            "fastgen",
            "bakeoff",
            "--url",
            a.url,
            "--label",
            "x",
            "--config-dir",
            str(dataset / "configs"),
            "--out",
            str(tmp_path / "reports"),
            "--scrape-interval",
            "0.5",
            "--configs",
            QUICK,
            "scenario3/c100_noisy",
            "--replica",
            a.url,
            "--replica",
            b.url,
            "--router-policy",
            "p",
        ]
        bakeoff_process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and "Dispatching session" not in _logs(tmp_path):
            time.sleep(0.2)
        b.stop()  # replica b goes away while the replay runs
        out, err = bakeoff_process.communicate(timeout=600)
    assert bakeoff_process.returncode == 1, out + err
    assert f"{QUICK}: failed: replica {b.url} stopped answering during the run" in out
    assert "scenario3/c100_noisy: failed: not run: the server stopped answering" in out
    assert run_record(tmp_path, QUICK)["metrics_errors"] >= 1


def _logs(tmp_path: Path) -> str:
    return "".join(p.read_text(errors="replace") for p in (tmp_path / "reports").rglob("inference-perf.log"))


@pytest.mark.slow  # the same, with replicas
def test_bakeoff_with_a_hidden_router_stops_before_the_first_config(dataset, tmp_path):
    with engine(dataset, tmp_path, "a") as a:
        result = bakeoff(dataset, tmp_path, a.url, "--configs", QUICK, "--router-policy", "cache_aware")
    assert result.returncode != 0
    assert result.stderr.strip().splitlines()[-1] == (
        f"fastgen: error: the router at {a.url} lists no replicas (GET /workers, GET /list_workers): pass each "
        f"replica's base URL with --replica URL"
    )
    assert not (tmp_path / "reports" / "x" / QUICK).exists()


def test_a_router_that_lists_its_replicas_and_names_its_policy_needs_neither_flag(engines):
    a, b = engines["a"], engines["b"]
    listing = json.dumps({"workers": [{"url": b.url}, {"url": a.url}]})
    with FakeRouter({"/workers": (200, listing), "/metrics": (200, ROUTER_METRICS)}) as router:
        front = LiveServer(router.url, VLLM, (MODEL,))
        fleet = open_fleet(front, MODEL, router_metrics=router.url + "/metrics")
        with pytest.raises(ServerError) as disagrees:
            open_fleet(front, MODEL, router_metrics=router.url + "/metrics", policy="round_robin")
        with pytest.raises(ServerError) as untold:
            open_fleet(front, MODEL)
    assert (fleet.policy, fleet.listed_by) == ("cache_aware", "GET /workers")
    assert fleet.policy_from == f"the router's metrics ({router.url}/metrics)"
    assert [r.url for r in fleet.replicas] == sorted([a.url, b.url])
    assert fleet.describe() == "; a router (cache_aware) in front of 2 replicas (listed by GET /workers)"
    assert str(disagrees.value) == (
        f"--router-policy round_robin, but the router's metrics at {router.url}/metrics say cache_aware: restart "
        f"the router with the policy you mean, or fix --router-policy"
    )
    assert str(untold.value).startswith(f"cannot tell the routing policy of {router.url}; pass --router-policy NAME")
