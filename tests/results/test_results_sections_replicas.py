"""results/sections/replicas.py: behind a router, each replica's share and the spread; no section without one."""

from __future__ import annotations

import pytest
from _support.results import identity, report_of, scenario1_requests, section, table, write_repeat

from fastgen.results import compare_runs


def fleet_record(policy: str, rows: list[tuple[str, int, int, int]]) -> dict:
    """run.json's fleet, as the bakeoff writes it behind a router: (url, requests, prompt, cached) per replica."""
    replicas = [{"url": u, "requests": n, "prompt_tokens": p, "cached_tokens": c} for u, n, p, c in rows]
    total = {k: sum(r[k] for r in replicas) for k in ("requests", "prompt_tokens", "cached_tokens")}
    return {"router": "http://router:30000", "policy": policy, "replicas": replicas, "sum": total}


def test_compare_shows_each_replicas_share_and_the_spread_behind_a_router(tmp_path):
    requests = scenario1_requests(900)  # 6 requests of 1000 prompt tokens, 3600 cached
    router = {"url": "http://router:30000", "policy": None, "replica_urls": ["http://r1", "http://r2"]}
    for label, policy, rows in (
        ("rr", "round_robin", [("http://r1", 3, 3000, 1200), ("http://r2", 3, 3000, 2400)]),
        ("ca", "cache_aware", [("http://r1", 5, 5000, 3600), ("http://r2", 1, 1000, 0)]),
    ):
        write_repeat(
            tmp_path / label / "scenario1" / "c2",
            requests,
            identity=identity(router={**router, "policy": policy}),
            counts={"fleet": fleet_record(policy, rows)},
        )
    write_repeat(  # a side whose counters do not add up to its requests
        tmp_path / "bad" / "scenario1" / "c2",
        requests,
        identity=identity(router={**router, "policy": "round_robin"}),
        counts={"fleet": fleet_record("round_robin", [("http://r1", 6, 5999, 3600)])},
    )
    compare_runs(tmp_path / "rr", tmp_path / "ca", tmp_path / "out", plots=False)
    report = report_of(tmp_path / "out")
    spread = table(report, "replicas", "Spread across replicas")
    shares = table(report, "replicas", "Each replica's share")
    setup = {row[""]: row for row in table(report, "setup", "What each side ran")}
    assert setup["router (policy, replicas)"] == {
        "": "router (policy, replicas)",
        "A: rr": "round_robin, 2 replicas",
        "B: ca": "cache_aware, 2 replicas",
    }
    assert [(r["side"], r["policy"], r["replicas"], r["counters = requests"]) for r in spread] == [
        ("A: rr", "round_robin", 2, "yes"),
        ("B: ca", "cache_aware", 2, "yes"),
    ]
    value = lambda cell: cell["value"]  # noqa: E731
    figures = [value(spread[1][k]) for k in ("imbalance", "hit % lowest", "hit % highest", "fleet hit %")]
    assert figures == pytest.approx([5 / 3, 0.0, 72.0, 60.0], abs=1e-6)
    assert [(r["policy"], r["replica"], r["requests"], value(r["hit %"])) for r in shares] == [
        ("round_robin", "http://r1", 3, 40.0),
        ("round_robin", "http://r2", 3, 80.0),
        ("cache_aware", "http://r1", 5, 72.0),
        ("cache_aware", "http://r2", 1, 0.0),
    ]
    assert [value(r["share %"]) for r in shares] == pytest.approx([50.0, 50.0, 500 / 6, 100 / 6], abs=1e-6)
    assert not section(report, "replicas")["problems"]
    compare_runs(tmp_path / "rr", tmp_path / "bad", tmp_path / "out-bad", plots=False)
    bad = report_of(tmp_path / "out-bad")
    assert [r["counters = requests"] for r in table(bad, "replicas", "Spread")] == ["yes", "NO"]
    assert section(bad, "replicas")["problems"] == [
        "scenario1/c2 on bad, repeat 1: the replicas counted 5,999 prompt tokens, the requests were answered with 6,000"
    ]


def test_compare_without_a_router_has_no_replicas_section(two_sides, tmp_path):
    compare_runs(*two_sides, tmp_path / "out", plots=False)
    assert all(s["id"] != "replicas" for s in report_of(tmp_path / "out")["sections"])
