"""Each engine's scheduling and prefix-cache rules, as far as the prediction models them (`fastgen analyze --engine`),
each named with the source it follows, and the scheduler settings they take (data only; engine.py applies them).

Read off vLLM 0.32.0 (`vllm/v1/core/sched/scheduler.py`, `kv_cache_manager.py`, `block_pool.py`) and SGLang 0.5.23
(`srt/managers/scheduler.py`, `schedule_policy.py`, `srt/mem_cache/prefill_budget.py`, `radix_cache.py`,
`schedule_batch.py`). Both engines serve requests in steps: each step runs one batch, whose length depends on the
tokens it computes (ServiceModel); a request that arrives during a step waits for the next. What decides a hit is
what is in the cache when a request is first admitted, so the rules below are about who is admitted when, and when
what a step computed becomes visible to the next request.

Left out, for both: speculative decoding, LoRA, multimodal inputs, KV connectors and offloading (hierarchical
cache), priorities, and cache hits on generated tokens (a next turn repeats the recorded answer, not the generated
one; the generated tokens take room, see cache.py). SGLang's `lpm` policy deprioritizes a waiting request that
shares 32 or more tokens with another waiting one (in-batch prefix caching): modelled; its other cache-aware policies
(`dfs-weight`, `hrrn`, `shortest-prefill-first`) run as FCFS here, and say so.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Optional

__all__ = [
    "CLIP_MAX_NEW_TOKENS",
    "ENGINE_RULES",
    "CacheRules",
    "Rule",
    "SchedulerSettings",
    "default_settings",
]


@dataclass(frozen=True)
class Rule:
    name: str
    what: str
    source: str  # file and function it follows


CLIP_MAX_NEW_TOKENS = 4096  # SGLang: CLIP_MAX_NEW_TOKENS, the most decode room reserved for one request


@dataclass(frozen=True)
class SchedulerSettings:
    """What an engine's scheduler is set to; each engine reads the fields it has (None: no limit).

    - batch_tokens: tokens one step may compute (vLLM `max_num_batched_tokens`; SGLang `chunked_prefill_size`, the
      chunk a prefill batch may take); a longer prompt is prefilled in chunks of at most this;
    - chunked_prefill: vLLM `enable_chunked_prefill` (without it a prompt longer than the budget left waits);
    - max_running: requests running at once (vLLM `max_num_seqs`; SGLang its effective `max_running_requests`);
    - max_prefill_tokens: SGLang's `max_prefill_tokens`, a prefill batch's own cap;
    - policy: the waiting queue's order (vLLM: fcfs; SGLang: fcfs or lpm, the others run as fcfs);
    - reserve_full_prompt: vLLM `scheduler_reserve_full_isl` (admit only when the whole prompt fits);
    - watermark: vLLM's fraction of blocks kept free when admitting;
    - new_token_ratio: SGLang's decode room per running request, (initial, floor, decay steps): it reserves this
      fraction of each running request's remaining max_tokens (init 0.7 x schedule_conservativeness, floor 0.14 of it,
      reached in 600 decode steps; back to the initial one after a retraction).
    """

    batch_tokens: Optional[int] = None
    chunked_prefill: bool = True
    max_running: Optional[int] = None
    max_prefill_tokens: Optional[int] = None
    policy: str = "fcfs"
    reserve_full_prompt: bool = True
    watermark: float = 0.0
    new_token_ratio: tuple[float, float, int] = (0.7, 0.098, 600)

    def describe(self, engine: str) -> str:
        """The settings an engine reads, in its own names, one line."""
        if engine == "sglang":
            ratio = self.new_token_ratio
            return (
                f"chunked_prefill_size {_limit(self.batch_tokens)}, max_prefill_tokens "
                f"{_limit(self.max_prefill_tokens)}, max_running_requests {_limit(self.max_running)}, "
                f"schedule_policy {self.policy}, decode reserve {ratio[0]:g} -> {ratio[1]:g} of max_tokens"
            )
        return (
            f"max_num_batched_tokens {_limit(self.batch_tokens)}, max_num_seqs {_limit(self.max_running)}, "
            f"policy {self.policy}, admission {'whole prompt' if self.reserve_full_prompt else 'first chunk'}"
            + (f", watermark {self.watermark:g}" if self.watermark else "")
        )


def _limit(value: Optional[int]) -> str:
    return "unlimited" if value is None else f"{value:,}"


@dataclass(frozen=True)
class CacheRules:
    engine: str
    default_block_size: int  # tokens per cached unit when --block-size is not given
    publish_after_prefill: bool  # False: a request's blocks serve others from the step that schedules them
    defaults: SchedulerSettings  # the settings of an engine started without scheduler flags (GPU, 80 GB class)
    defaults_from: str  # where those defaults come from
    rules: tuple[Rule, ...] = field(default_factory=tuple)

    def describe(self, block_size: int) -> str:
        """One line: what a prediction under these rules assumes."""
        unit = (
            f"{self.engine}'s rules: blocks of {block_size} tokens, chained hashes"
            if self.engine == "vllm"
            else f"{self.engine}'s rules: radix cache at page size {block_size}"
        )
        publish = (
            "published as each prefill chunk completes"
            if self.publish_after_prefill
            else "published when the step that computes them is scheduled"
        )
        return f"{unit}, {publish}, the last prompt token always computed"


VLLM_RULES = (
    Rule(
        "step budget",
        "each step computes at most max_num_batched_tokens tokens: running requests first (a decode token each, or "
        "the next chunk of a prefill), then waiting ones in FCFS order; a prompt longer than what is left is "
        "prefilled in chunks (chunked prefill is on by default)",
        "v1/core/sched/scheduler.py Scheduler.schedule",
    ),
    Rule(
        "admission",
        "a waiting request is admitted only if the blocks for its whole prompt, less its cache hit, fit in the free "
        "blocks (free or cached and unused: scheduler_reserve_full_isl), and fewer than max_num_seqs run; the first "
        "that does not fit stops the queue (FCFS)",
        "v1/core/kv_cache_manager.py KVCacheManager.allocate_slots (full_sequence_must_fit)",
    ),
    Rule(
        "hit",
        "at its first admission: the leading full blocks already cached, never the last prompt token; counted in "
        "prefix_cache_hits only then (a preempted request's second lookup is counted apart)",
        "v1/core/kv_cache_manager.py get_computed_blocks, record_prefix_cache_stats",
    ),
    Rule(
        "publication",
        "a block is registered (hashed, found by later lookups) when the step that computes it is scheduled, before "
        "it is computed: a request scheduled later in the same step hits it; a chunk registers its own full blocks",
        "v1/core/kv_cache_manager.py allocate_slots -> cache_blocks",
    ),
    Rule(
        "preemption",
        "when a running request needs a block and none is free, the last admitted running request is preempted: its "
        "blocks are freed (they stay cached until evicted) and it waits at the head of the queue, to be recomputed",
        "v1/core/sched/scheduler.py Scheduler.schedule, _preempt_request",
    ),
    Rule(
        "eviction",
        "freed blocks join the free queue tail first (a sequence's last block first); new blocks take the queue's "
        "head, evicting what it cached; a hit takes a block back out of the queue",
        "v1/core/block_pool.py BlockPool.free_blocks, get_new_blocks; FreeKVCacheBlockQueue",
    ),
)

SGLANG_RULES = (
    Rule(
        "step kinds",
        "a step is a prefill batch or a decode batch, prefill first when one can be formed (mixed chunks are off by "
        "default); a prefill batch takes waiting requests in policy order until chunked_prefill_size (or "
        "max_prefill_tokens) is spent, the last one chunked; one chunked request at a time continues first",
        "srt/managers/scheduler.py get_next_batch_to_run, _get_new_batch_prefill_raw; schedule_policy.py PrefillAdder",
    ),
    Rule(
        "admission",
        "a request is admitted if its uncached tokens plus its max_tokens (at most 4,096) plus a page fit in the free "
        "and evictable tokens less the decode room reserved for running requests (new_token_ratio x their remaining "
        "max_tokens) and for the requests admitted before it in the batch; once one does not fit, no prefill is "
        "tried again until a running request leaves",
        "srt/managers/schedule_policy.py PrefillAdder.add_one_req; srt/mem_cache/prefill_budget.py PrefillBudget",
    ),
    Rule(
        "policy",
        "fcfs (the default) keeps arrival order; lpm sorts the queue by the cached prefix found now, a request that "
        "shares 32+ tokens with an earlier waiting one last (in-batch prefix caching); lpm turns to fcfs past 128 "
        "waiting",
        "srt/managers/schedule_policy.py SchedulePolicy.calc_priority, _compute_prefix_matches",
    ),
    Rule(
        "hit",
        "at its first admission: the longest cached prefix to the page, never the last prompt token; counted once "
        "(a retracted request's second match is not)",
        "srt/managers/schedule_batch.py Req.init_next_round_input, prepare_for_extend (cached_tokens)",
    ),
    Rule(
        "publication",
        "a request's prefilled tokens enter the radix tree when its prefill batch completes (a chunk when its chunk "
        "does): requests in the same batch compute a shared prefix each, the next batch hits it",
        "srt/managers/scheduler.py process_batch_result_prefill -> tree_cache.cache_unfinished_req",
    ),
    Rule(
        "retraction",
        "when a decode step cannot fit one token per running request, requests are retracted (fewest generated "
        "tokens, longest prompt first) back to the queue; their prompt stays in the tree, unlocked",
        "srt/managers/schedule_batch.py ScheduleBatch.retract_decode",
    ),
    Rule(
        "eviction",
        "leaves no running request holds, least recently used first; a finished request's tokens are touched when "
        "inserted, so this is the order of release, a sequence's tail first",
        "srt/mem_cache/radix_cache.py RadixCache.evict, cache_finished_req",
    ),
)

ENGINE_RULES = {
    "vllm": CacheRules(
        "vllm",
        16,
        publish_after_prefill=False,
        defaults=SchedulerSettings(batch_tokens=8192, max_running=1024, policy="fcfs"),
        defaults_from="vLLM 0.32's defaults for its OpenAI server on an 80 GB-class GPU (H100, H200)",
        rules=VLLM_RULES,
    ),
    "sglang": CacheRules(
        "sglang",
        1,
        publish_after_prefill=True,
        defaults=SchedulerSettings(batch_tokens=8192, max_running=None, max_prefill_tokens=16384, policy="fcfs"),
        defaults_from="SGLang 0.5.23's defaults on an 80 GB-class GPU (chunked_prefill_size 8192)",
        rules=SGLANG_RULES,
    ),
}


def default_settings(engine: str, **given) -> SchedulerSettings:
    """The engine's default settings with `given` ones (None: not given) in their place."""
    return replace(ENGINE_RULES[engine].defaults, **{k: v for k, v in given.items() if v is not None})
