"""A prefix cache over token ids, at vLLM's granularity: full 16-token blocks identified by a chained hash.

A block's key is the hash of its tokens and of the key of the block before it, so equal keys mean equal whole
prefixes, exactly what vLLM's automatic prefix caching matches. Like vLLM, at least the prompt's last token is
always computed, and nothing is ever evicted (an e2e run sees a few MB of tokens).
"""

from __future__ import annotations

from typing import Sequence

__all__ = ["BLOCK_SIZE", "PrefixCache"]

BLOCK_SIZE = 16


class PrefixCache:
    def __init__(self, block_size: int = BLOCK_SIZE) -> None:
        self.block_size = block_size
        self._blocks: set[int] = set()

    def _keys(self, ids: Sequence[int], limit: int):
        key = 0
        size = self.block_size
        for start in range(0, limit - size + 1, size):
            key = hash((key, tuple(ids[start:start + size])))
            yield key

    def lookup_and_insert(self, ids: Sequence[int]) -> int:
        """Tokens of `ids` already cached (a multiple of the block size, below len(ids)); then cache all of ids."""
        cached = 0
        for key in self._keys(ids, len(ids) - 1):  # vLLM recomputes the last token to get logits
            if key not in self._blocks:
                break
            cached += self.block_size
        self._blocks.update(self._keys(ids, len(ids)))
        return cached

    def clear(self) -> None:
        self._blocks.clear()
