"""analysis/routing.py: N replicas behind a router: which replica each request reaches, and what each policy buys."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
from _support import ROOT
from conftest import run_fastgen

from fastgen.analysis import AnalysisOptions, analyze, config_targets
from fastgen.analysis.engine_base import Served
from fastgen.analysis.routing import BALANCE_ABS_THRESHOLD, Router


def served(blocks, prompt: int = 0) -> Served:
    blocks = np.asarray(blocks, dtype=np.int32)
    return Served(None, blocks, prompt=prompt or 10 * len(blocks) + 5, output=5, max_new=5, arrival=0.0, seq=0)


def test_round_robin_takes_the_replicas_in_turn_and_one_replica_takes_everything():
    router = Router("round_robin", 3)
    assert [router.pick(served([1]), "s", [0, 0, 0]) for _ in range(7)] == [0, 1, 2, 0, 1, 2, 0]
    assert {Router(policy, 1).pick(served([1]), "s", [5]) for policy in ("round_robin", "cache_aware")} == {0}


def test_consistent_hash_keeps_a_session_on_one_replica():
    router = Router("consistent_hash", 4)
    picks = {session: {router.pick(served([k]), session, [0] * 4) for k in range(5)} for session in "abcdefgh"}
    assert all(len(replicas) == 1 for replicas in picks.values())
    assert len(set().union(*picks.values())) > 1  # and spreads sessions


def test_cache_aware_follows_the_longest_routed_prefix_unless_the_load_is_out_of_balance():
    router = Router("cache_aware", 2, block_size=10)
    first = router.pick(served([1, 2, 3, 4]), "a", [0, 0])
    other = router.pick(served([9, 8, 7, 6]), "b", [1, 0])  # nothing shared: the replica routed fewer tokens
    assert other != first
    assert router.pick(served([1, 2, 3, 4, 5]), "c", [1, 1]) == first  # 4 of 5 blocks routed there
    busy = [0, 0]
    busy[first] = BALANCE_ABS_THRESHOLD + 10
    assert router.pick(served([1, 2, 3, 4, 5, 6]), "d", busy) == 1 - first  # out of balance: the idlest


@pytest.fixture(scope="module")
def small(e2e_dataset) -> Path:
    return e2e_dataset


def test_on_replicas_session_affinity_and_prefix_routing_keep_more_than_round_robin(small):
    # scenario 3's twenty sessions on four replicas with a cache each of about five prompts: round-robin sends each
    # session's next turn to another replica, whose cache never saw the session; the two others keep it at home
    targets = [t for t in config_targets(small / "configs", small / "traces") if t.name == "scenario3/c100_noisy"]
    options = AnalysisOptions(block_size=16, capacity_tokens=16448, replicas=4, band=0)
    hit = {}
    for policy in ("round_robin", "consistent_hash", "cache_aware"):
        (result,) = analyze(
            targets, small / "traces" / "tokenizer", dataclasses.replace(options, router=policy), workers=1
        )[1]
        assert len(result.replicas) == 4 and sum(r["requests"] for r in result.replicas) == result.requests
        assert sum(r["prompt_tokens"] for r in result.replicas) == result.prompt_tokens
        hit[policy] = result.percent(result.cached_capacity)
    assert hit["consistent_hash"] > hit["round_robin"] + 5
    assert hit["cache_aware"] > hit["round_robin"] + 5


def test_analyze_refuses_more_replicas_than_sessions_in_one_line(small):
    result = run_fastgen(
        "analyze",
        str(small / "traces"),
        "--only",
        "scenario1/c10",
        "--replicas",
        "9",
        cwd=ROOT,
    )
    assert result.returncode != 0 and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "scenario1/c10 replays 4 sessions: 9 replicas would leave some without any; give at most 4" in result.stderr


def test_analyze_prints_the_load_spread_and_each_replica_with_verbose(small):
    result = run_fastgen(
        "analyze",
        str(small / "traces"),
        "--only",
        "scenario3/c100_noisy",
        "--replicas",
        "2",
        "--router",
        "cache_aware",
        "--band",
        "0",
        "--verbose",
        cwd=ROOT,
    )
    assert result.returncode == 0, result.stderr
    assert "load spread" in result.stdout and "2 replicas behind a cache_aware router" in result.stdout
    assert "per replica (cache_aware router)" in result.stdout
    # the unbounded ceiling moves with the router: the legend says whose it is
    assert "hit % infinite and capacity are the fleet's, pooled over all its requests, each replica its own cache" in (
        result.stdout
    )
