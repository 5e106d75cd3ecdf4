"""analysis/cache.py: the block cache with vLLM's rules on hand-made blocks with hand-computed answers, against a
block-by-block reference; the block ids that name hashes."""

from __future__ import annotations

import random

import numpy as np
import pytest
from _support.analysis import BS, hashes

from fastgen.analysis.cache import BlockCache, BlockIds
from fastgen.errors import SpecError


def test_two_sessions_sharing_exactly_k_blocks_hit_k_blocks():
    cache = BlockCache(BS)
    first, held = cache.admit(hashes(*range(1, 11)), 10 * BS + 5)
    cache.publish(held)
    second, _ = cache.admit(hashes(1, 2, 3, 4, 101, 102), 6 * BS + 5)
    assert (first, second) == (0, 4 * BS)


def test_the_last_prompt_token_is_always_computed():
    cache = BlockCache(BS)
    _, held = cache.admit(hashes(1, 2, 3, 4), 4 * BS)
    cache.publish(held)
    again, _ = cache.admit(hashes(1, 2, 3, 4), 4 * BS)  # exactly 4 full blocks: the 4th holds the last token
    assert again == 3 * BS


def test_blocks_a_running_request_holds_are_not_evicted():
    cache = BlockCache(BS, capacity_tokens=4 * BS)
    _, running = cache.admit(hashes(1, 2, 3), 3 * BS + 1)
    cache.publish(running)
    _, other = cache.admit(hashes(7, 8, 9), 3 * BS + 1)  # needs 3 blocks, 1 free: the running request's stay
    cache.publish(other)
    assert cache.overflowed == 2 and cache.evicted == 0
    again, _ = cache.admit(hashes(1, 2, 3, 4), 4 * BS + 1)
    assert again == 3 * BS


def test_a_hold_from_before_a_clear_is_released_as_nothing():
    cache = BlockCache(BS, capacity_tokens=8 * BS)
    _, old = cache.admit(hashes(1, 2, 3), 3 * BS + 1)
    cache.publish(old)
    cache.clear()
    got, new = cache.admit(hashes(1, 2, 3), 3 * BS + 1)
    cache.publish(new)
    assert got == 0
    cache.release(old)  # must not free the blocks `new` holds now
    _, filler = cache.admit(hashes(20, 21, 22, 23, 24), 5 * BS + 1)  # needs every block but the three held ones
    cache.publish(filler)
    assert cache.evicted == 0 and cache.overflowed == 0
    again, _ = cache.admit(hashes(1, 2, 3, 4), 4 * BS + 1)
    assert again == 3 * BS


def test_a_capacity_smaller_than_one_request_is_refused():
    with pytest.raises(SpecError, match="smaller than one request"):
        BlockCache(BS, capacity_tokens=2 * BS).check_fits(3 * BS, "x")


class ReferenceCache:
    """BlockCache's rules one block at a time, with plain Python containers: what the vectorized one must equal."""

    def __init__(self, capacity_blocks):
        self.capacity, self.cached, self.held, self.free = capacity_blocks, set(), {}, {}  # free: insertion order
        self.evicted = self.overflowed = 0

    def admit(self, blocks, prompt_tokens):
        limit = min(len(blocks), max(0, (prompt_tokens - 1) // BS))
        hit = 0
        while hit < limit and blocks[hit] in self.cached:
            hit += 1
        holding = list(blocks[:hit])
        for b in holding:
            self._hold(b)
        rest = list(blocks[hit:])
        for b in rest:  # computed by another request meanwhile: held before any room is made
            if b in self.cached:
                self._hold(b)
                holding.append(b)
        for b in rest:
            if b in holding:
                continue
            if len(self.cached) >= self.capacity:
                if not self.free:
                    self.overflowed += 1
                    continue
                oldest = next(iter(self.free))
                del self.free[oldest]
                self.cached.discard(oldest)
                self.evicted += 1
            self.cached.add(b)
            self._hold(b)
            holding.append(b)
        order = {b: i for i, b in enumerate(blocks)}
        return hit * BS, sorted(holding, key=order.__getitem__)

    def _hold(self, b):
        self.held[b] = self.held.get(b, 0) + 1
        self.free.pop(b, None)

    def release(self, holding):
        for b in reversed(holding):
            self.held[b] -= 1
            if not self.held[b]:
                del self.held[b]
                self.free[b] = None


@pytest.mark.parametrize("seed", range(6))
def test_block_cache_equals_a_block_by_block_reference(seed):
    """Random overlapping requests (shared prefixes, re-found blocks, a full cache) against ReferenceCache: the
    same hits, evictions and overflows at every step."""
    rng = random.Random(seed)
    capacity = rng.choice([6, 12, 40])
    cache, reference = BlockCache(BS, capacity_tokens=capacity * BS), ReferenceCache(capacity)
    running = []
    prefixes = [list(range(100 * p, 100 * p + 30)) for p in range(4)]
    for _ in range(300):
        if running and (rng.random() < 0.45 or len(running) > 4):
            held, ref_held = running.pop(rng.randrange(len(running)))
            cache.release(held)
            reference.release(ref_held)
            continue
        prefix = rng.choice(prefixes)
        blocks = prefix[: rng.randrange(1, 12)] + [rng.randrange(10_000, 10_050) for _ in range(rng.randrange(0, 4))]
        blocks = list(dict.fromkeys(blocks))  # a chain never repeats a block
        tokens = len(blocks) * BS + rng.choice([0, 5])
        got, held = cache.admit(np.asarray(blocks), tokens)
        cache.publish(held)
        want, ref_held = reference.admit(blocks, tokens)
        assert got == want
        assert sorted(held.held.tolist()) == sorted(ref_held)
        assert (cache.evicted, cache.overflowed) == (reference.evicted, reference.overflowed)
        running.append((held, ref_held))


def test_block_ids_give_forgotten_ids_to_new_hashes_and_keep_the_others():
    ids = BlockIds()
    rng = np.random.default_rng(11)
    live: dict[int, int] = {}
    for round_ in range(60):  # enough to rebuild the table several times, tombstones and all
        batch = np.unique(rng.integers(0, 2**63, 3000, dtype=np.uint64))
        got = ids.of_distinct(batch)
        for h, i in zip(batch.tolist(), got.tolist()):
            assert live.setdefault(h, i) == i
        assert len(set(live.values())) == len(live) == len(ids)  # no id names two hashes
        assert max(live.values()) < 2 * 3000 + 3000  # forgotten ids are reused: the ids stay few
        gone = [h for h in live if rng.random() < 0.7] if round_ % 2 else []
        forgotten = ids.forget(np.asarray(gone, dtype=np.uint64))
        assert sorted(forgotten.tolist()) == sorted(live.pop(h) for h in gone)
    again = ids.of(np.asarray(list(live), dtype=np.uint64))  # the kept ones are found, not numbered anew
    assert again.tolist() == list(live.values())


def test_a_forgotten_block_keeps_its_room_until_it_is_evicted():
    cache = BlockCache(BS, capacity_tokens=4 * BS)
    _, a = cache.admit(hashes(1, 2, 3), 3 * BS + 1)
    cache.publish(a)
    cache.release(a)
    cache.forget(hashes(1, 2, 3))  # ids 1, 2 and 3 will name other blocks
    got, b = cache.admit(hashes(1, 2, 3), 3 * BS + 1)
    assert got == 0  # not the blocks that were cached under those ids
    cache.publish(b)
    assert cache.evicted == 2  # three new blocks, one free block: two of the forgotten ones made room
    assert cache.used_tokens == 4 * BS


def test_block_ids_number_hashes_densely_in_first_seen_order():
    ids = BlockIds()
    rng = np.random.default_rng(7)
    pool = rng.integers(0, 2**63, 5000, dtype=np.uint64) * np.uint64(2)  # many collisions modulo the table size
    pool[:50] = np.arange(50, dtype=np.uint64) << np.uint64(40)  # equal low bits: one long probe run
    want: dict[int, int] = {}
    for _ in range(40):  # batches that repeat earlier hashes and themselves, across several table growths
        batch = rng.choice(pool, rng.integers(1, 600))
        expected = [want.setdefault(int(h), len(want)) for h in batch.tolist()]
        assert ids.of(batch).tolist() == expected
    assert len(ids) == len(want)


def test_generated_tokens_take_room_while_running_and_are_evicted_before_the_prompt_they_follow():
    # room for 6 blocks: a 4-block prompt generating 2 blocks fills it; the next request's new blocks evict the
    # generated ones first (freed first, as vLLM frees a sequence's tail first), so the prompt's prefix survives
    cache = BlockCache(BS, capacity_tokens=6 * BS)
    _, first = cache.admit(hashes(1, 2, 3, 4), 4 * BS + 5)
    cache.publish(first, output_tokens=2 * BS)
    assert cache.used_tokens == 6 * BS
    cache.release(first)
    cached, second = cache.admit(hashes(1, 2, 7, 8), 4 * BS + 5)
    cache.publish(second)
    assert cached == 2 * BS and cache.evicted == 2  # the two generated blocks, not blocks 3 and 4
    cache.release(second)
    third, _ = cache.admit(hashes(1, 2, 3, 4), 4 * BS + 5)
    assert third == 4 * BS
    # without the generated blocks' room, nothing would have been evicted at all
    plain = BlockCache(BS, capacity_tokens=6 * BS)
    _, hold = plain.admit(hashes(1, 2, 3, 4), 4 * BS + 5)
    plain.publish(hold)
    plain.release(hold)
    _, hold = plain.admit(hashes(1, 2, 7, 8), 4 * BS + 5)
    plain.publish(hold)
    assert plain.evicted == 0
