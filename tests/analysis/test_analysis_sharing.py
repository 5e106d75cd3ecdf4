"""analysis/sharing.py: the blocks that occur in one session only."""

from __future__ import annotations

import numpy as np

from fastgen.analysis.sharing import SharedBlocks


def test_shared_blocks_never_call_a_hash_of_two_sessions_single():
    rng = np.random.default_rng(5)
    common = rng.integers(0, 2**63, 200, dtype=np.uint64)
    sessions = [
        np.unique(np.concatenate([common[: rng.integers(0, 200)], rng.integers(0, 2**63, 2000, dtype=np.uint64)]))
        for _ in range(300)
    ]
    shared = SharedBlocks()
    for session in sessions:
        shared.add_session(session)
    counts: dict[int, int] = {}
    for session in sessions:
        for h in session.tolist():
            counts[h] = counts.get(h, 0) + 1
    every = np.asarray(list(counts), dtype=np.uint64)
    single = shared.single(every)
    many = np.asarray([counts[h] > 1 for h in counts.keys()])
    assert many.any() and not (single & many).any()  # never wrong about a shared hash
    assert single[~many].mean() > 0.95  # and right about nearly all the others (false positives cost memory)
