"""A prefix cache over blocks, with vLLM's rules, that a schedule drives request by request.

- A request's hit is its leading blocks already cached, never its last prompt token (vLLM always computes that
  one to get logits): at most (prompt - 1) // block_size blocks.
- Its blocks are held while it runs. Without a capacity nothing is ever evicted (the infinite cache). With one,
  blocks no running request holds wait in least-recently-released order and the oldest are evicted first when new
  blocks need room, as vLLM's free-block queue does; a hit takes a block back out of that queue.
- A block a request computes becomes a hit for others once it is `publish`ed; the schedule publishes at once, as
  vLLM registers blocks when it schedules them, or as the prefill ends, as SGLang inserts them (rules.py).

A request's generated tokens take room too (`publish(admission, output_tokens)`): blocks for them are held while it
runs and join the free queue when it ends, ahead of its prompt's blocks (vLLM caches full blocks of generated tokens;
SGLang inserts them into its radix tree as leaves), so they are evicted first, and they push older prefixes out of a
full cache. No later prompt hits them here: where a next turn repeats the answer token for token, vLLM and SGLang
could, and the prediction leaves that out (with recorded outputs the next prompt holds the recorded answer, not the
generated one).

Blocks are dense ids (BlockIds turns chained block hashes into them), so the cache's state is a few numpy arrays
indexed by block and each request costs a handful of vectorized steps, not one Python step per block: the full
default set replays about 68 million blocks per capacity.
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from ..errors import SpecError

__all__ = ["Admission", "BlockCache", "BlockIds"]

_GROW_BATCH = 1 << 16
_EMPTY, _CLAIMED, _TOMBSTONE = -1, -2, -3  # BlockIds slots that hold no id


class BlockIds:
    """Dense ids for block hashes: equal hashes, equal ids; new ones numbered in first-seen order, taking first the
    ids of hashes `forget` let go (so the ids, and the caches' arrays indexed by them, stay as few as the blocks
    still remembered).

    An open-addressing hash table in numpy arrays (linear probing, at most 60 % full, forgotten hashes left as
    tombstones until the table is rebuilt), filled a batch at a time: 3.2 million distinct blocks take about 100 MB
    here and about 400 MB in a dict."""

    def __init__(self) -> None:
        self._keys = np.zeros(1 << 12, dtype=np.uint64)
        self._ids = np.full(1 << 12, _EMPTY, dtype=np.int32)
        self._live = 0  # hashes with an id
        self._filled = 0  # slots not empty: live hashes and tombstones
        self._next = 0  # the next id never given
        self._free = np.zeros(0, dtype=np.int32)  # ids given back by forget, reused first-in first-out

    def __len__(self) -> int:
        return self._live

    def of(self, hashes: np.ndarray) -> np.ndarray:
        """The ids of `hashes` (any 64-bit values), new ones numbered in order of first appearance."""
        hashes = np.asarray(hashes, dtype=np.uint64)
        if not len(hashes):
            return np.zeros(0, dtype=np.int32)
        unique, first, inverse = np.unique(hashes, return_index=True, return_inverse=True)
        by_appearance = np.argsort(first, kind="stable")
        ids = np.empty(len(unique), dtype=np.int32)
        ids[by_appearance] = self.of_distinct(unique[by_appearance])  # new ones numbered in order of appearance
        return ids[inverse.reshape(-1)]

    def of_distinct(self, hashes: np.ndarray) -> np.ndarray:
        """`of` for hashes that are distinct already (new ones numbered in the order given), without its sort."""
        hashes = np.asarray(hashes, dtype=np.uint64)
        if (self._filled + len(hashes)) * 5 > len(self._keys) * 3:
            self._rebuild(len(hashes))
        slots, new = self._place(hashes)
        self._ids[slots[np.sort(new)]] = self._new_ids(len(new))
        return self._ids[slots]

    def _new_ids(self, count: int) -> np.ndarray:
        reused = min(count, len(self._free))
        ids = np.concatenate([self._free[:reused], np.arange(self._next, self._next + count - reused, dtype=np.int32)])
        self._free = self._free[reused:]
        self._next += count - reused
        self._live += count
        self._filled += count
        return ids

    def forget(self, hashes: np.ndarray) -> np.ndarray:
        """Let go of `hashes` (distinct, each with an id): their ids, which later new hashes will take."""
        hashes = np.asarray(hashes, dtype=np.uint64)
        if not len(hashes):
            return np.zeros(0, dtype=np.int32)
        slots, new = self._place(hashes)
        if len(new):
            raise ValueError(f"{len(new)} of the hashes to forget have no id")
        ids = self._ids[slots].copy()
        self._ids[slots] = _TOMBSTONE
        self._free = np.concatenate([self._free, ids])
        self._live -= len(ids)
        return ids

    def _place(self, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(each distinct key's slot, the indexes of the keys that were not there yet, now claimed with _CLAIMED)."""
        mask = np.uint64(len(self._keys) - 1)
        slots = (keys & mask).astype(np.int64)
        pending = np.arange(len(keys))
        new = []
        while len(pending):
            at = slots[pending]
            ids = self._ids[at]
            empty = ids == _EMPTY
            # a tombstone is probed past, never found: a forgotten hash seen again gets a new id
            found = (ids != _TOMBSTONE) & ~empty & (self._keys[at] == keys[pending])
            if empty.any():  # the first of the keys probing an empty slot claims it; the others probe on
                claim, first = np.unique(at[empty], return_index=True)
                winners = pending[empty][first]
                self._keys[claim], self._ids[claim] = keys[winners], _CLAIMED
                new.append(winners)
                found[np.flatnonzero(empty)[first]] = True
            occupied_by_other = ~found & ~empty
            pending, at = pending[~found], at[~found]
            step = occupied_by_other[~found]
            slots[pending[step]] = (at[step] + 1) & int(mask)
        return slots, (np.concatenate(new) if new else np.zeros(0, dtype=np.int64))

    def _rebuild(self, coming: int) -> None:
        """A table for the live hashes and `coming` more, at most 30 % full, without tombstones."""
        used = np.flatnonzero(self._ids >= 0)
        keys, ids = self._keys[used], self._ids[used]
        del used
        size = 1 << 12
        while (self._live + coming) * 10 > size * 3:
            size *= 2
        self._keys = np.zeros(size, dtype=np.uint64)
        self._ids = np.full(size, _EMPTY, dtype=np.int32)
        # a batch at a time: _place's working arrays for millions of keys at once would outweigh the table
        for start in range(0, len(keys), _GROW_BATCH):
            slots, _ = self._place(keys[start : start + _GROW_BATCH])
            self._ids[slots] = ids[start : start + _GROW_BATCH]
        self._filled = self._live


class Admission:
    """A running request's hold on the cache: its blocks, how many it found cached, the blocks it holds (all of them
    but the ones a full cache had no room for), and slots of its own that no lookup finds: its generated tokens', a
    partial last block's, and blocks it computed twice (vLLM keeps a block computed again as a copy of its own).

    The engine's step-by-step use (engine.py) fills it a part at a time: `registered` leading blocks are held (found
    or published), the next `pending` slots are claimed for blocks still being computed (SGLang publishes them when
    the step ends)."""

    __slots__ = ("blocks", "cached_blocks", "held", "epoch", "generated", "registered", "pending", "covered")

    def __init__(self, blocks: np.ndarray, cached_blocks: int, epoch: int = 0) -> None:
        self.blocks, self.cached_blocks, self.held = blocks, cached_blocks, blocks[:cached_blocks]
        self.epoch = epoch  # the cache's clear() count when it was made: a hold from before a clear holds nothing
        self.generated = np.zeros(0, dtype=np.int32)  # slots of its own no lookup finds (no block id)
        self.registered = cached_blocks  # leading blocks held: found cached, or published
        self.pending = np.zeros(0, dtype=np.int32)  # slots claimed for the blocks after those, not yet published
        self.covered = cached_blocks  # blocks of its sequence (prompt, then generated tokens) it has a slot for

    @property
    def slots(self) -> int:
        """Cache slots the request takes: its held blocks, its pending ones and its own."""
        return len(self.held) + len(self.pending) + len(self.generated)


class BlockCache:
    """Without a capacity, the cache is a flag per block id. With one, each cached block has a slot (at most the
    capacity's number of them) that carries its holders and its place in the free queue, and the only state per
    block id is its slot: 4 bytes, against the 13 a block's whole state would take in every id's row."""

    def __init__(
        self, block_size: int, capacity_tokens: Optional[int] = None, *, publish_after_prefill: bool = False
    ) -> None:
        self.block_size = block_size
        # when the schedule publishes a request's blocks (rules.py): at its start (vLLM) or when its prefill ends
        self.publish_after_prefill = publish_after_prefill
        self.capacity = None if capacity_tokens is None else capacity_tokens // block_size
        self._cached = np.zeros(1024, dtype=bool)  # infinite cache: block -> its content is in the cache
        self._slot = np.full(1024, -1, dtype=np.int32)  # finite cache: block -> its slot (-1: not cached)
        self._block = np.zeros(0, dtype=np.int32)  # slot -> the block it caches
        self._holders = np.zeros(0, dtype=np.int32)  # slot -> running requests holding its block
        # The free-block queue as an append-only log of released slots: a slot's live entry is the position
        # _entry[slot] records (-1: not in the queue); a hit or an eviction leaves its old entry stale, skipped.
        self._entry = np.zeros(0, dtype=np.int64)
        self._unused = np.zeros(0, dtype=np.int32)  # slots evicted and free to reuse; _slots_made is the next new one
        self._slots_made = 0
        self._log = np.zeros(1024, dtype=np.int32)
        self._head = self._tail = 0  # the log's live part, as absolute positions; _log[i - _base]
        self._base = 0
        self._used = 0
        self._evictable = 0  # slots in the free queue: cached, held by no running request
        self.evicted = 0
        self.overflowed = 0  # blocks not kept because running requests held the whole cache
        self._epoch = 0

    def check_fits(self, prompt_tokens: int, what: str) -> None:
        if self.capacity is not None and prompt_tokens > self.capacity * self.block_size:
            raise SpecError(
                f"a KV capacity of {self.capacity * self.block_size} tokens is smaller than one request "
                f"({what}: {prompt_tokens} prompt tokens); give a larger --kv-cache-tokens or "
                f"--kv-cache-gib"
            )

    def _cover(self, blocks: np.ndarray) -> None:
        top = int(blocks.max()) + 1 if len(blocks) else 0
        if self.capacity is None:
            if top > len(self._cached):
                self._cached = _extended(self._cached, max(top, 2 * len(self._cached)), False)
        elif top > len(self._slot):
            self._slot = _extended(self._slot, max(top, 2 * len(self._slot)), -1)

    def admit(self, blocks: np.ndarray, prompt_tokens: int) -> tuple[int, Admission]:
        """(cached tokens, the request's hold) for a request starting now; blocks are BlockIds ids."""
        blocks = np.asarray(blocks)
        self._cover(blocks)
        limit = min(len(blocks), max(0, (prompt_tokens - 1) // self.block_size))
        found = self._cached[blocks[:limit]] if self.capacity is None else self._slot[blocks[:limit]] >= 0
        hit = limit if found.all() else int(np.argmin(found))
        admission = Admission(blocks, hit, self._epoch)
        if self.capacity is not None and hit:
            leading = self._slot[blocks[:hit]]
            self._holders[leading] += 1  # a request's blocks are distinct: its chain never repeats a prefix
            self._take_out(leading)
        return hit * self.block_size, admission

    def lookup(self, blocks: np.ndarray, prompt_tokens: int) -> tuple[int, int]:
        """(the leading blocks a request would find cached now, how many of those sit in the free queue), without
        taking them: what an engine weighs before it admits the request."""
        blocks = np.asarray(blocks)
        limit = min(len(blocks), max(0, (prompt_tokens - 1) // self.block_size))
        if self.capacity is None:
            top = len(self._cached)
            found = blocks[:limit] < top
            found[found] = self._cached[blocks[:limit][found]]
            return (limit if found.all() else int(np.argmin(found))), 0
        top = len(self._slot)
        inside = blocks[:limit] < top
        slots = np.full(limit, -1, dtype=np.int32)
        slots[inside] = self._slot[blocks[:limit][inside]]
        hit = limit if (slots >= 0).all() else int(np.argmin(slots >= 0))
        return hit, int((self._entry[slots[:hit]] >= 0).sum())

    def room(self) -> Optional[int]:
        """Blocks a request could take now: free ones and cached ones no running request holds (None: unbounded)."""
        return None if self.capacity is None else self.capacity - self._used + self._evictable

    def claim_to(self, admission: Admission, sequence_blocks: int) -> int:
        """Give the request slots for its sequence's blocks up to `sequence_blocks` (prompt blocks it does not hold
        yet become pending, those past its full prompt blocks its own); returns how many it could not get (a full
        cache, which the engine's admission avoids)."""
        if self.capacity is None:
            return 0
        wanted = sequence_blocks - admission.covered
        if wanted <= 0:
            return 0
        given = self._claim(wanted)
        self._block[given] = -1  # no block id until published
        to_prompt = max(0, min(len(given), len(admission.blocks) - admission.registered - len(admission.pending)))
        if to_prompt:
            admission.pending = np.concatenate([admission.pending, given[:to_prompt]])
        if len(given) > to_prompt:
            admission.generated = np.concatenate([admission.generated, given[to_prompt:]])
        admission.covered += len(given)
        return wanted - len(given)

    def publish_to(self, admission: Admission, upto_blocks: int, *, share: bool) -> None:
        """Publish the request's prompt blocks up to `upto_blocks` (their slots claimed, claim_to): later lookups
        find them. A block another request published meanwhile is held in its place (`share`, as SGLang's radix
        tree keeps one copy) or kept as a copy of the request's own that no lookup finds (as vLLM keeps it)."""
        start = admission.registered
        if self.capacity is None:
            end = min(upto_blocks, len(admission.blocks))
            if end > start:
                self._cover(admission.blocks[start:end])
                self._cached[admission.blocks[start:end]] = True
                admission.registered = end
            return
        count = min(upto_blocks, len(admission.blocks)) - start
        count = min(count, len(admission.pending))
        if count <= 0:
            return
        ids, slots = admission.blocks[start : start + count], admission.pending[:count]
        admission.pending = admission.pending[count:]
        self._cover(ids)
        existing = self._slot[ids]
        dup = existing >= 0
        if dup.any():
            if share:  # hold the copy that is there, give back the slot computed again
                self._holders[existing[dup]] += 1
                self._take_out(existing[dup])
                self._give_back(slots[dup])
            else:
                admission.generated = np.concatenate([admission.generated, slots[dup]])
            keep = ~dup
            self._slot[ids[keep]] = slots[keep]
            self._block[slots[keep]] = ids[keep]
            ids = ids if share else ids[keep]
        else:
            self._slot[ids] = slots
            self._block[slots] = ids
        admission.held = np.concatenate([admission.held, ids]) if len(admission.held) else ids
        admission.registered = start + count

    def _give_back(self, slots: np.ndarray) -> None:
        """Slots a request claimed and no longer needs, free at once (they hold nothing)."""
        self._holders[slots] = 0
        self._entry[slots] = -1
        self._block[slots] = -1
        self._unused = np.concatenate([self._unused, slots])
        self._used -= len(slots)

    def _take_out(self, slots: np.ndarray) -> None:
        """Slots a running request now holds leave the free queue (their entries there go stale)."""
        queued = self._entry[slots] >= 0
        self._evictable -= int(queued.sum())
        self._entry[slots] = -1

    def publish(self, admission: Admission, output_tokens: int = 0) -> None:
        """The request's computed blocks can serve others from now on; with a capacity, room is also taken for the
        blocks of the `output_tokens` it will generate (after its prompt's, if the cache has room for both)."""
        rest = admission.blocks[admission.cached_blocks :]
        if self.capacity is None:
            self._cached[rest] = True
            return
        self._publish_prompt(admission, rest)
        if output_tokens > 0:
            self._take_generated(admission, -(-output_tokens // self.block_size))

    def _take_generated(self, admission: Admission, count: int) -> None:
        given = self._claim(count)
        self._block[given] = -1  # no block id: nothing will ever hit it
        admission.generated = given

    def _publish_prompt(self, admission: Admission, rest: np.ndarray) -> None:
        slots = self._slot[rest]
        meanwhile = slots >= 0  # computed by another request since: held first, so never evicted for it
        found = slots[meanwhile]
        self._holders[found] += 1
        self._take_out(found)
        new = rest[~meanwhile]
        given = self._claim(len(new))
        kept = rest
        if len(given) < len(new):  # running requests hold the rest of the cache: the first new blocks get the room
            keep = meanwhile.copy()
            keep[np.flatnonzero(~meanwhile)[: len(given)]] = True
            kept, new = rest[keep], new[: len(given)]
        self._slot[new] = given
        self._block[given] = new
        admission.held = np.concatenate([admission.held, kept]) if admission.cached_blocks else kept

    def _claim(self, count: int) -> np.ndarray:
        """Up to `count` slots, held once, evicting free blocks for them; fewer (the shortfall counted in
        `overflowed`) when running requests hold the rest of the cache. Their `_block` is the caller's to set."""
        assert self.capacity is not None  # publish: only a cache with a capacity takes room
        room = self.capacity - self._used
        if count > room:
            room += self._evict(count - room)
        if count > room:
            self.overflowed += count - room
            count = room
        given = self._take_slots(count)
        self._holders[given] = 1
        self._entry[given] = -1
        self._used += count
        return given

    def _take_slots(self, count: int) -> np.ndarray:
        keep = len(self._unused) - min(count, len(self._unused))  # slots evicted before, then new ones
        reused, self._unused = self._unused[keep:], self._unused[:keep]
        fresh = count - len(reused)
        if self._slots_made + fresh > len(self._block):
            assert self.capacity is not None  # only a cache with a capacity has slots (publish)
            size = min(self.capacity, max(self._slots_made + fresh, 2 * len(self._block), 1024))
            self._block = _extended(self._block, size, 0)
            self._holders = _extended(self._holders, size, 0)
            self._entry = _extended(self._entry, size, -1)
        made = np.arange(self._slots_made, self._slots_made + fresh, dtype=np.int32)
        self._slots_made += fresh
        return np.concatenate([reused, made]) if len(reused) else made

    def _evict(self, wanted: int) -> int:
        """Evict up to `wanted` free blocks, the least recently released first; returns how many."""
        evicted: list[np.ndarray] = []
        got, window = 0, max(4 * wanted, 1024)
        while got < wanted and self._head < self._tail:
            end = min(self._tail, self._head + window)
            positions = np.arange(self._head, end)
            candidates = self._log[self._head - self._base : end - self._base]
            live = np.flatnonzero(self._entry[candidates] == positions)[: wanted - got]
            if len(live) == wanted - got:
                end = self._head + int(live[-1]) + 1
            chosen = candidates[live]
            evicted.append(chosen)
            got += len(chosen)
            self._head = end
            window *= 2
        if got:
            chosen = np.concatenate(evicted)
            blocks = self._block[chosen]
            self._slot[blocks[blocks >= 0]] = -1  # -1: a forgotten block's slot, which held its room until now
            self._entry[chosen] = -1
            self._unused = np.concatenate([self._unused, chosen])
            self._used -= got
            self._evictable -= got
            self.evicted += got
        return got

    def release(self, admission: Admission) -> None:
        """The request has ended: blocks it was the last to hold join the free queue, tail blocks first (so they are
        evicted before the prefix they extend, as vLLM frees them)."""
        if self.capacity is None or admission.epoch != self._epoch or not admission.slots:
            return
        held = self._slot[admission.held]  # a held block stays cached: its slot is its own until it is released
        self._holders[held] -= 1
        freed = held[self._holders[held] == 0][::-1]
        own = (
            np.concatenate([admission.pending, admission.generated]) if len(admission.pending) else admission.generated
        )
        if len(own):  # the generated blocks come after the prompt's: freed, so evicted, first
            self._holders[own] -= 1
            freed = np.concatenate([own[::-1], freed])
        admission.held, admission.pending = admission.held[:0], admission.pending[:0]
        admission.generated, admission.registered, admission.covered = admission.generated[:0], 0, 0
        # a block this request re-found cached after another request's release is in held once; its old entry
        # was made stale by the hold, so it re-enters the queue here, at the back
        if len(freed):
            self._append(freed)

    def _append(self, slots: np.ndarray) -> None:
        live = self._tail - self._head
        if self._tail - self._base + len(slots) > len(self._log):
            # keep only the live part, then make room: the log's memory follows the free queue, not the run
            kept = self._log[self._head - self._base : self._tail - self._base]
            size = max(1024, 2 * (live + len(slots)))
            self._log = np.zeros(size, dtype=np.int32)
            self._log[:live] = kept
            self._base = self._head
        start = self._tail - self._base
        self._log[start : start + len(slots)] = slots
        self._entry[slots] = np.arange(self._tail, self._tail + len(slots))
        self._tail += len(slots)
        self._evictable += len(slots)

    def forget(self, blocks: np.ndarray) -> None:
        """`blocks` (ids no running request holds) will never be asked for again, and their ids will name other
        blocks: a finite cache keeps their room, and their place in the free queue, until they are evicted."""
        blocks = np.asarray(blocks)
        if self.capacity is None:
            self._cached[blocks[blocks < len(self._cached)]] = False
            return
        blocks = blocks[blocks < len(self._slot)]
        slots = self._slot[blocks]
        self._block[slots[slots >= 0]] = -1
        self._slot[blocks] = -1

    def clear(self) -> None:
        """Forget every cached block (a server's cache reset); holds of running requests are dropped too."""
        self._cached[:] = False
        self._slot[:] = -1
        self._holders[:] = 0
        self._entry[:] = -1
        self._unused = np.zeros(0, dtype=np.int32)
        self._slots_made = 0
        self._head = self._tail = self._base = 0
        self._used = 0
        self._evictable = 0
        self._epoch += 1

    @property
    def capacity_tokens(self) -> Optional[int]:
        return None if self.capacity is None else self.capacity * self.block_size

    @property
    def used_tokens(self) -> int:
        if self.capacity is None:
            return int(self._cached.sum()) * self.block_size
        return self._used * self.block_size


def _extended(array: np.ndarray, size: int, fill) -> np.ndarray:
    grown = np.full(size, fill, dtype=array.dtype)
    grown[: len(array)] = array
    return grown
