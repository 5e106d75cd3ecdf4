"""A prefix cache over token ids, at vLLM's granularity: full 16-token blocks identified by a chained hash.

A block's key is the hash of its tokens and of the key of the block before it, so equal keys mean equal whole
prefixes, exactly what vLLM's automatic prefix caching matches. Like vLLM, at least the prompt's last token is
always computed. Without a capacity nothing is evicted (an e2e run sees a few MB of tokens); with one, the least
recently used blocks go first when a prompt's new blocks do not fit (a hit refreshes a block, as in vLLM's free
queue). Blocks of a prompt longer than the whole capacity are not kept.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Optional, Sequence

__all__ = ["BLOCK_SIZE", "PrefixCache"]

BLOCK_SIZE = 16


class PrefixCache:
    def __init__(self, block_size: int = BLOCK_SIZE, capacity_tokens: Optional[int] = None) -> None:
        self.block_size = block_size
        self.capacity_blocks = None if capacity_tokens is None else max(1, capacity_tokens // block_size)
        self._blocks: OrderedDict[int, None] = OrderedDict()
        self.queries = self.hits = self.evicted_blocks = 0  # tokens looked up, tokens found, blocks evicted

    def _keys(self, ids: Sequence[int], limit: int):
        key = 0
        size = self.block_size
        for start in range(0, limit - size + 1, size):
            key = hash((key, tuple(ids[start:start + size])))
            yield key

    @property
    def used_tokens(self) -> int:
        return len(self._blocks) * self.block_size

    def lookup_and_insert(self, ids: Sequence[int]) -> int:
        """Tokens of `ids` already cached (a multiple of the block size, below len(ids)); then cache all of ids."""
        cached = 0
        for key in self._keys(ids, len(ids) - 1):  # vLLM recomputes the last token to get logits
            if key not in self._blocks:
                break
            cached += self.block_size
        self.queries += len(ids)
        self.hits += cached
        keys = list(self._keys(ids, len(ids)))
        if self.capacity_blocks is not None and len(keys) > self.capacity_blocks:
            keys = []  # a prompt larger than the cache: computed, not kept
        for key in keys:
            self._blocks[key] = None
            self._blocks.move_to_end(key)
        while self.capacity_blocks is not None and len(self._blocks) > self.capacity_blocks:
            self._blocks.popitem(last=False)
            self.evicted_blocks += 1
        return cached

    def clear(self) -> None:
        self._blocks.clear()
