"""analysis/side_by_side.py: several replays over one read of a corpus, each as it would run alone."""

from __future__ import annotations

import dataclasses
import random

import pytest
from _support.analysis import BS, request

from fastgen.analysis.cache import BlockCache
from fastgen.analysis.schedule import Load, PlannedRequest, replay_slots, simulate, single_engine
from fastgen.analysis.side_by_side import Replay, read_order, run_side_by_side


def _random_corpus(rng: random.Random, files: int) -> dict[int, list[PlannedRequest]]:
    sessions = {}
    for f in range(files):
        own = [1000 * (f + 1) + k for k in range(30)]
        turns, blocks = [], [1, 2, 3][: rng.randrange(1, 4)]
        for t in range(rng.randrange(1, 5)):
            blocks = blocks + own[4 * t : 4 * t + rng.randrange(1, 5)]
            turns.append(
                request(
                    f"t{t}",
                    blocks,
                    preds=(f"t{t - 1}",) if t else (),
                    wait_ms=rng.randrange(0, 3000),
                    output=rng.randrange(1, 200),
                    label=str(t + 1),
                )
            )
        sessions[f] = turns
    return sessions


@pytest.mark.parametrize("seed, other_seed", [(0, 42), (1, 42), (2, 7)])
def test_replays_side_by_side_equal_each_replay_alone_and_hold_few_sessions(seed, other_seed):
    """Several configs' replays over one read: the same outcomes as each simulated alone, and, where they share the
    corpus order (one base_seed, as a dataset's configs do), at no time more sessions read but not yet started by
    every replay that runs them than the largest concurrency (replays run one after another would hold the whole
    corpus; with another base_seed a session waits until the other order reaches it)."""
    rng = random.Random(seed)
    sessions = _random_corpus(rng, 60)
    loads = [Load(2, 60), Load(5, 40, session_rate=2.0), Load(3, 60, base_seed=other_seed)]
    capacities = [None, 30 * BS, None]  # a request (11 blocks and up to 13 of output) fits alone
    alone = [
        simulate(
            sessions.__getitem__, replay_slots(60, load.base_seed, load.num_sessions), load, BlockCache(BS, capacity)
        )
        for load, capacity in zip(loads, capacities)
    ]
    seen = [[] for _ in loads]
    replays = [
        Replay(
            replay_slots(60, load.base_seed, load.num_sessions),
            load,
            single_engine(BlockCache(BS, capacity)),
            lambda outcome, _request, k=k: seen[k].append(outcome),
        )
        for k, (load, capacity) in enumerate(zip(loads, capacities))
    ]
    read, pending = [], {}
    users = {f: sum(f in r.slots for r in replays) for f in sessions}
    most = [0]

    def counted():
        def on_session(session):
            index = next(f for f, s in sessions.items() if s is session)
            pending[index] -= 1
            if not pending[index]:
                del pending[index]

        return on_session

    for r in replays:
        r.on_session = counted()

    def reader(order):
        assert sorted(order) == sorted(set().union(*(r.slots for r in replays)))
        for index in order:
            read.append(index)
            pending[index] = users[index]
            most[0] = max(most[0], len(pending))
            yield index, sessions[index]

    run_side_by_side(replays, reader)

    def admitted(outcomes):  # as admitted (on_start): simulate's also carry when each request got its answer
        return [[dataclasses.replace(o, first_token_s=None, end_s=None) for o in run] for run in outcomes]

    assert admitted(seen) == admitted(alone)
    assert not pending
    if other_seed == 42:
        assert most[0] <= max(load.concurrent_sessions for load in loads) + 1, most[0]


def test_read_order_takes_the_replays_slots_position_by_position():
    assert read_order([[3, 1, 2], [3, 1, 2, 0], [5, 3]]) == [3, 5, 1, 2, 0]
