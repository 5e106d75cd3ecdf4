"""A prefix cache over block hashes, with vLLM's rules, that a schedule drives request by request.

- A request's hit is its leading blocks already cached, never its last prompt token (vLLM always computes that
  one to get logits): at most (prompt - 1) // block_size blocks.
- Its blocks are held while it runs. Without a capacity nothing is ever evicted (the infinite cache). With one,
  blocks no running request holds wait in least-recently-released order and the oldest are evicted first when new
  blocks need room, as vLLM's free-block queue does; a hit takes a block back out of that queue.
- A block a request computes becomes a hit for others once it is `publish`ed; the schedule publishes at once, as
  vLLM registers blocks when it schedules them.

Only prompt blocks are cached here; vLLM also caches full blocks of generated tokens, which a next turn can hit
where its prompt repeats the answer token for token: the prediction leaves those out.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Optional

import numpy as np

from ..errors import SpecError

__all__ = ["BlockCache", "Admission"]


class Admission:
    """A running request's hold on the cache: the blocks it found and the ones it computes."""

    __slots__ = ("hashes", "cached_blocks")

    def __init__(self, hashes: list[int], cached_blocks: int) -> None:
        self.hashes, self.cached_blocks = hashes, cached_blocks


class BlockCache:
    def __init__(self, block_size: int, capacity_tokens: Optional[int] = None) -> None:
        self.block_size = block_size
        self.capacity = None if capacity_tokens is None else capacity_tokens // block_size
        self._cached: set[int] = set()  # blocks whose content is in the cache (held or free)
        self._held: dict[int, int] = {}  # block -> running requests holding it
        self._free: OrderedDict[int, None] = OrderedDict()  # cached, held by nobody: eviction order, oldest first
        self.evicted = 0
        self.overflowed = 0  # blocks not kept because running requests held the whole cache

    def check_fits(self, prompt_tokens: int, what: str) -> None:
        if self.capacity is not None and prompt_tokens > self.capacity * self.block_size:
            raise SpecError(f"a KV capacity of {self.capacity * self.block_size} tokens is smaller than one request "
                            f"({what}: {prompt_tokens} prompt tokens); give a larger --kv-cache-tokens or "
                            f"--kv-cache-gib")

    def admit(self, hashes: np.ndarray, prompt_tokens: int) -> tuple[int, Admission]:
        """(cached tokens, the request's hold) for a request starting now."""
        limit = min(len(hashes), max(0, (prompt_tokens - 1) // self.block_size))
        keys = hashes.tolist()
        if self.capacity is None:
            # Nothing is evicted, so the cached blocks of a chain are a leading run (a key names its whole prefix,
            # which was cached with it): find its end by bisection, and holds do not matter.
            lo, hi = 0, limit
            while lo < hi:
                mid = (lo + hi + 1) // 2
                if keys[mid - 1] in self._cached:
                    lo = mid
                else:
                    hi = mid - 1
            return lo * self.block_size, Admission(keys, lo)
        hit = 0
        while hit < limit and keys[hit] in self._cached:
            hit += 1
        for key in keys[:hit]:
            self._hold(key)
        return hit * self.block_size, Admission(keys, hit)

    def _hold(self, key: int) -> None:
        self._held[key] = self._held.get(key, 0) + 1
        self._free.pop(key, None)

    def publish(self, admission: Admission) -> None:
        """The request's computed blocks can serve others from now on."""
        if self.capacity is None:
            self._cached.update(admission.hashes[admission.cached_blocks:])
            return
        for key in admission.hashes[admission.cached_blocks:]:
            if key in self._cached:  # another request computed it meanwhile
                self._hold(key)
                continue
            if self.capacity is not None and len(self._cached) >= self.capacity and not self._evict():
                self.overflowed += 1
                continue
            self._cached.add(key)
            self._hold(key)

    def _evict(self) -> bool:
        if not self._free:
            return False
        key, _ = self._free.popitem(last=False)
        self._cached.discard(key)
        self.evicted += 1
        return True

    def release(self, admission: Admission) -> None:
        """The request has ended: its blocks join the eviction order, tail blocks first (so they are evicted before
        the prefix they extend, as vLLM frees them)."""
        if self.capacity is None:
            return
        for key in reversed(admission.hashes):
            count = self._held.get(key)
            if count is None:
                continue
            if count > 1:
                self._held[key] = count - 1
            else:
                del self._held[key]
                self._free[key] = None

    def clear(self) -> None:
        """Forget every cached block (a server's cache reset); holds of running requests are dropped too."""
        self._cached.clear()
        self._held.clear()
        self._free.clear()

    @property
    def used_tokens(self) -> int:
        return len(self._cached) * self.block_size
