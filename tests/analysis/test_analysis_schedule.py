"""analysis/schedule.py: the replay's order (inference-perf's shuffle) and sessions simulated against one engine."""

from __future__ import annotations

import random

import pytest
from _support.analysis import BS, request

from fastgen.analysis.cache import BlockCache
from fastgen.analysis.schedule import Load, replay_slots, simulate


def test_replay_slots_are_inference_perfs_shuffle():
    order = list(range(50))
    random.seed(42)
    random.shuffle(order)
    assert replay_slots(50, 42, 10) == order[:10]
    assert replay_slots(3, 7, 10) == replay_slots(3, 7, 3)  # never more slots than files


def test_fan_out_branches_run_together_and_share_the_root():
    root = request("root", [1, 2, 3, 4], label="0")
    branches = [
        request(f"b{k}", [1, 2, 3, 4, 5, 10 + k], preds=("root",), wait_ms=100, label=str(k)) for k in range(1, 4)
    ]
    cache = BlockCache(BS)
    outcomes = simulate(lambda i: [root, *branches], [0], Load(1, 1), cache)
    cached = {o.event_id: o.cached_tokens for o in outcomes}
    # the root's 4 blocks for every branch; block 5 is new to the first branch to start, then the siblings hit it
    assert cached == {"root": 0, "b1": 4 * BS, "b2": 5 * BS, "b3": 5 * BS}
    starts = {o.event_id: o.start_s for o in outcomes}
    assert starts["b1"] == starts["b2"] == starts["b3"] > starts["root"]


def test_a_capacity_of_one_request_evicts_the_other_sessions_prefix_tail_first():
    # no output but the one token each request gives: the capacities below are counted in prompt blocks (generated
    # blocks take room too, tested below)
    a1 = request("a1", [1, 2, 3], output=0, extra=0)
    a2 = request("a2", [1, 2, 3, 4], preds=("a1",), wait_ms=60_000, label="2", output=0, extra=0)
    b1 = request("b1", [7, 8, 9], output=0, extra=0)
    sessions = {0: [a1, a2], 1: [b1]}
    load = Load(2, 2, session_rate=0.5)  # b's session starts at 2 s, after a1 ended and before a2 (15 s later)
    unbounded = simulate(sessions.__getitem__, [0, 1], load, BlockCache(BS))
    assert {o.event_id: o.cached_tokens for o in unbounded}["a2"] == 3 * BS
    # room for a2's four blocks: b1 evicted two of a1's free blocks, tail first, so a2 still finds a1's first one
    four = simulate(sessions.__getitem__, [0, 1], load, BlockCache(BS, capacity_tokens=4 * BS))
    assert {o.event_id: o.cached_tokens for o in four}["a2"] == 1 * BS
    # room for both sessions' blocks: nothing evicted
    six = simulate(sessions.__getitem__, [0, 1], load, BlockCache(BS, capacity_tokens=6 * BS))
    assert {o.event_id: o.cached_tokens for o in six}["a2"] == 3 * BS


def test_a_slower_prefill_keeps_a_request_running_and_the_next_waits_for_its_room():
    """a1 (3 blocks) starts at 0 s; b1 (3 other blocks) at 2 s, in a cache of 4 blocks. Fast, a1 has ended when b1
    arrives: b1 is admitted at once. At 10 prefill tokens/s a1's prefill takes 4.8 s: b1 does not fit beside it and is
    admitted when a1 ends (simulated seconds, not wall). Either way b1 then evicts a1's tail, and a2 finds one block."""
    from fastgen.analysis.schedule import ServiceModel

    a1 = request("a1", [1, 2, 3], output=0, extra=0)
    a2 = request("a2", [1, 2, 3, 4], preds=("a1",), wait_ms=15_000, label="2", output=0, extra=0)
    b1 = request("b1", [7, 8, 9], output=0, extra=0)
    sessions = {0: [a1, a2], 1: [b1]}
    load = Load(2, 2, session_rate=0.5)

    def run(service):
        outcomes = simulate(sessions.__getitem__, [0, 1], load, BlockCache(BS, capacity_tokens=4 * BS), model=service)
        return {o.event_id: o for o in outcomes}

    fast, slow = run(ServiceModel()), run(ServiceModel(prefill_tokens_per_s=10.0))
    assert fast["b1"].start_s == slow["b1"].start_s == 2.0
    assert fast["b1"].admitted_s == pytest.approx(2.0, abs=0.001)  # the front end's tokenizing, 24 microseconds
    assert slow["b1"].admitted_s == pytest.approx(slow["a1"].end_s) == pytest.approx(4.8, abs=0.001)
    assert fast["a2"].cached_tokens == slow["a2"].cached_tokens == 1 * BS
