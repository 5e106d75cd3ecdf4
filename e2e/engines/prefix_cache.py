"""The fake server's prefix cache: fastgen.analysis's BlockCache (vLLM's rules, the same code `fastgen analyze`
predicts with) over the ids of the real chat-template rendering, with the counters a server's /metrics shows.

A request is looked up and its blocks registered when it arrives (vLLM registers blocks when it schedules them);
it holds them until its response has been sent, then they may be evicted (least recently released first) when a
capacity is given. Without one nothing is ever evicted.
"""

from __future__ import annotations

from typing import Optional, Sequence

import numpy as np

from fastgen.analysis.cache import Admission, BlockCache, BlockIds
from fastgen.traces.blocks import block_hashes

__all__ = ["BLOCK_SIZE", "PrefixCache"]

BLOCK_SIZE = 16


class PrefixCache:
    def __init__(self, block_size: int = BLOCK_SIZE, capacity_tokens: Optional[int] = None) -> None:
        self.block_size = block_size
        self._cache = BlockCache(block_size, capacity_tokens)
        self._blocks = BlockIds()
        self.queries = self.hits = 0  # tokens looked up, tokens found

    def lookup_and_insert(self, ids: Sequence[int], output_tokens: int = 0) -> tuple[int, Admission]:
        """(tokens of `ids` already cached, the request's hold on its blocks and on room for its `output_tokens`
        until `release`)."""
        blocks = self._blocks.of(block_hashes(np.asarray(ids, dtype=np.uint32), self.block_size))
        cached, hold = self._cache.admit(blocks, len(ids))
        self._cache.publish(hold, output_tokens)
        self.queries += len(ids)
        self.hits += cached
        return cached, hold

    def release(self, hold: Admission) -> None:
        self._cache.release(hold)

    @property
    def evicted_blocks(self) -> int:
        return self._cache.evicted

    @property
    def used_tokens(self) -> int:
        return self._cache.used_tokens

    def clear(self) -> None:
        self._cache.clear()
