"""Each engine's prefix-cache rules, as far as the prediction models them (`fastgen analyze --engine`).

Both engines hit the leading part of a prompt that is already cached, never its last token (it is computed for the
logits), in whole units: vLLM's full blocks of `--block-size` tokens (16 on GPU, 32 on the CPU build), found by chained
hashes; SGLang's radix tree at its `--page-size` (1 by default, so a hit can end mid-block). Both keep what no running
request holds in least-recently-used order and evict the oldest first. What differs, and what the model keeps:

- when computed tokens can serve others: vLLM registers a request's blocks when it schedules it, so a request
  scheduled in the same step hits them; SGLang inserts a request's tokens into its radix tree as its prefill
  completes, so requests that start together compute a shared prefix each (measured on both real engines: scenario 2's
  branches sent at once);
- the unit: blocks for vLLM, pages for SGLang.

Left out, for both: prefill in chunks (a long prompt's first chunks are published before its last one is computed;
the model publishes all of it at once), SGLang's eviction by last access rather than by release (the two orders agree
for a chain of turns, each released as the next starts), and cached generated tokens (see cache.py).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ENGINE_RULES", "CacheRules"]


@dataclass(frozen=True)
class CacheRules:
    engine: str
    default_block_size: int  # tokens per cached unit when --block-size is not given
    publish_after_prefill: bool  # False: a request's blocks serve others from the moment it starts

    def describe(self, block_size: int) -> str:
        """One line: what a prediction under these rules assumes."""
        unit = (
            f"{self.engine}'s rules: blocks of {block_size} tokens, chained hashes"
            if self.engine == "vllm"
            else f"{self.engine}'s rules: radix cache at page size {block_size}"
        )
        publish = (
            "published when the prefill completes"
            if self.publish_after_prefill
            else "published when the request is scheduled"
        )
        return f"{unit}, {publish}, the last prompt token always computed"


ENGINE_RULES = {
    "vllm": CacheRules("vllm", 16, publish_after_prefill=False),
    "sglang": CacheRules("sglang", 1, publish_after_prefill=True),
}
