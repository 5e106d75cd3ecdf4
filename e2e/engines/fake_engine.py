"""What makes the fake server look like one engine or another, and behave like a server with a finite KV cache.

A profile says which engine it imitates (vLLM or SGLang: the `/metrics` names, the reset endpoint and its answers,
`owned_by`), how large its KV cache is (LRU eviction past it), and what a prompt token it did not have cached costs
(one prefill at a time, so misses cost time and queue under load). Two profiles that differ only in capacity are a
pair of engines whose difference is known: the smaller one has the lower hit ratio and, on later turns, the higher
TTFT. The metrics are built with prometheus_client from the live state at each scrape.

Faults a bakeoff must notice, each off by default: every Nth chat request answered HTTP 500 (`fail_every`), a
restart after N answered requests (`restart_after`: a new process start time, an empty cache, counters from zero),
a reset endpoint that answers an empty 200 and keeps the cache (`reset_keeps_cache`), answers of a fraction of
the usual length (`output_scale`, so two engines differ in output lengths), a named tool_choice answered with
another of the request's tools (`ignore_tool_choice`, as SGLang 0.5.23's hermes parser may), and no `/metrics`
(`metrics_endpoint`, as SGLang without --enable-metrics), and a startup warmup (`warmup_s`: as SGLang, GET /health
answers 503 that long after the start while /v1/models already answers, then the warmup request's prompt tokens are
in its counter). Like the real engines it exports its
process start time and its KV capacity (vLLM's `cache_config_info` labels, SGLang's `max_total_num_tokens`), and as
SGLang does, its KV usage both as a gauge rounded to 1 % (`sglang:token_usage`) and as a count of tokens
(`sglang:num_used_tokens`).

Latency jitter (`jitter_s`, off by default): each prefill waits a further random time, exponential with that mean,
drawn from a generator seeded with `seed`, so two engines of one profile are two servers that differ by chance alone
(the A/A check, e2e/suites/bakeoff_aa.py). Which request draws which value follows their arrival, as on a real server.
"""

from __future__ import annotations

import asyncio
import random
import time
from dataclasses import dataclass
from typing import Optional

from .prefix_cache import PrefixCache

__all__ = ["EngineProfile", "EngineState", "FLAVOURS", "VERSIONS"]

FLAVOURS = ("vllm", "sglang")
VERSIONS = {"vllm": "0.0.0+fake", "sglang": "0.0.0+fake"}  # what GET /version and /get_server_info say
# SGLang's warmup prompt "The capital city of France is", as its counter grew in a real run (e2e-pair)
WARMUP_PROMPT_TOKENS = 7
# a capacity for the exported cache size when none is set (nothing is evicted then; real engines always have one)
UNBOUNDED_EXPORTED_TOKENS = 1 << 24


@dataclass(frozen=True)
class EngineProfile:
    flavour: str = "vllm"
    kv_capacity_tokens: Optional[int] = None  # None: nothing is ever evicted
    prefill_s_per_token: float = 0.0  # seconds per uncached prompt token
    reset_endpoint: bool = True  # False: vLLM without VLLM_SERVER_DEV_MODE (no /reset_prefix_cache)
    die_after: Optional[int] = None  # exit the process when this many chat requests have been answered
    null_zero_details: bool = False  # as both real engines do: no prompt_tokens_details when nothing was cached
    cache_report: bool = True  # False: like vLLM without --enable-prompt-tokens-details (no cached-token counts)
    fail_every: Optional[int] = None  # answer every Nth chat request with HTTP 500
    restart_after: Optional[int] = None  # after this many answered chat requests, act as a restarted process
    reset_keeps_cache: bool = False  # the reset endpoint answers an empty 200 and empties nothing
    output_scale: float = 1.0  # text answers of this fraction of the usual length (at least one token)
    ignore_tool_choice: bool = False  # a named tool_choice answered with another of the request's tools
    metrics_endpoint: bool = True  # False: no /metrics (404), like SGLang without --enable-metrics
    warmup_s: float = 0.0  # SGLang's startup warmup: /health answers 503 this long, then its tokens are counted
    jitter_s: float = 0.0  # mean of an exponential wait added to every prefill (0: none)
    seed: int = 0  # of the jitter's generator

    def __post_init__(self) -> None:
        if self.flavour not in FLAVOURS:
            raise ValueError(f"unknown flavour {self.flavour!r}; use one of {FLAVOURS}")

    @property
    def exported_capacity_tokens(self) -> int:
        return self.kv_capacity_tokens or UNBOUNDED_EXPORTED_TOKENS

    @property
    def reset_path(self) -> str:
        return "/reset_prefix_cache" if self.flavour == "vllm" else "/flush_cache"


class EngineState:
    """Requests running and waiting, counters, and the one prefill lane; lives on the server's event loop."""

    def __init__(self, profile: EngineProfile, model_name: str) -> None:
        self.profile, self.model_name = profile, model_name
        self.cache = PrefixCache(capacity_tokens=profile.kv_capacity_tokens)
        self.running = self.waiting = 0
        self.prompt_tokens = self.generation_tokens = self.answered = 0
        self.finished_requests = 0  # its request counter, which a restart sets back to zero (answered is not)
        self.received = 0  # chat requests received, for fail_every
        self.process_start = time.time()
        self.restarted = False
        self._prefill: Optional[asyncio.Lock] = None
        self._jitter = random.Random(profile.seed)

    def should_fail(self) -> bool:
        """Count a chat request; whether it is one fail_every answers with HTTP 500."""
        self.received += 1
        every = self.profile.fail_every
        return every is not None and every != 0 and self.received % every == 0

    def maybe_restart(self) -> None:
        """After restart_after answered requests, once: what a restarted engine shows (a new process start, an empty
        cache, counters from zero). Requests in flight finish; their holds belong to the old cache."""
        after = self.profile.restart_after
        if after is None or self.restarted or self.answered < after:
            return
        self.restarted = True
        self.process_start = max(time.time(), self.process_start + 1.0)
        self.cache.clear()
        self.cache.queries = self.cache.hits = 0
        self.prompt_tokens = self.generation_tokens = self.finished_requests = 0

    async def prefill(self, uncached_tokens: int) -> None:
        """Wait for the prefill lane, then spend the uncached tokens' cost on it."""
        if self._prefill is None:
            self._prefill = asyncio.Lock()
        self.waiting += 1
        acquired = False
        try:
            async with self._prefill:
                self.waiting -= 1
                acquired = True
                self.running += 1
                wait = self.prefill_wait(uncached_tokens)
                if wait:
                    await asyncio.sleep(wait)
        except BaseException:
            if acquired:
                self.running -= 1
            else:
                self.waiting -= 1
            raise

    def prefill_wait(self, uncached_tokens: int) -> float:
        """Seconds one prefill takes: the uncached tokens' cost, and a draw of the jitter."""
        wait = uncached_tokens * self.profile.prefill_s_per_token
        return wait + (self._jitter.expovariate(1.0 / self.profile.jitter_s) if self.profile.jitter_s else 0.0)

    def finished(self, prompt_tokens: int, completion_tokens: int) -> None:
        """A request that got through prefill has ended (answered, or its client went away)."""
        self.running -= 1
        self.prompt_tokens += prompt_tokens
        self.generation_tokens += completion_tokens
        self.answered += 1
        self.finished_requests += 1

    @property
    def warming_up(self) -> bool:
        return time.time() < self.process_start + self.profile.warmup_s

    @property
    def busy(self) -> bool:
        return bool(self.running or self.waiting)

    def used_tokens(self) -> int:
        capacity = self.profile.kv_capacity_tokens
        return self.cache.used_tokens if not capacity else min(capacity, self.cache.used_tokens)

    def kv_usage(self) -> float:
        capacity = self.profile.kv_capacity_tokens
        return 0.0 if not capacity else min(1.0, self.cache.used_tokens / capacity)

    def metrics_text(self) -> bytes:
        from prometheus_client import CollectorRegistry, generate_latest
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        state = self
        labels = {"model_name": self.model_name, **({"engine": "0"} if self.profile.flavour == "vllm" else {})}

        def gauge(name: str, doc: str, value: float):
            family = GaugeMetricFamily(name, doc, labels=list(labels))
            family.add_metric(list(labels.values()), value)
            return family

        def counter(name: str, doc: str, value: float, extra: Optional[dict] = None):
            names = {**labels, **(extra or {})}
            family = CounterMetricFamily(name, doc, labels=list(names))
            family.add_metric(list(names.values()), value)
            return family

        profile = state.profile
        block = state.cache.block_size

        def cache_config():  # vLLM's: the values are labels, the sample 1
            names = {
                "block_size": str(block),
                "num_gpu_blocks": str(profile.exported_capacity_tokens // block),
                "enable_prefix_caching": "True",
            }
            family = GaugeMetricFamily(
                "vllm:cache_config_info", "Information of the LLMEngine CacheConfig", labels=list(names)
            )
            family.add_metric(list(names.values()), 1.0)
            return family

        class Collector:
            def collect(self):
                cache = state.cache
                yield GaugeMetricFamily(
                    "process_start_time_seconds",
                    "Start time of the process since unix epoch in seconds.",
                    value=state.process_start,
                )
                if profile.flavour == "vllm":
                    yield cache_config()
                    yield gauge("vllm:num_requests_running", "Running requests.", state.running)
                    yield gauge("vllm:num_requests_waiting", "Waiting requests.", state.waiting)
                    yield gauge("vllm:kv_cache_usage_perc", "KV-cache usage, 1 is full.", state.kv_usage())
                    yield counter("vllm:prefix_cache_queries", "Prefix cache queries (tokens).", cache.queries)
                    yield counter("vllm:prefix_cache_hits", "Prefix cache hits (tokens).", cache.hits)
                    yield counter("vllm:num_preemptions", "Preemptions.", 0)
                    yield counter("vllm:prompt_tokens", "Prefill tokens.", state.prompt_tokens)
                    yield counter("vllm:request_success", "Finished requests.", state.finished_requests)
                    yield counter("vllm:generation_tokens", "Generation tokens.", state.generation_tokens)
                else:
                    yield gauge("sglang:num_running_reqs", "Running requests.", state.running)
                    yield gauge("sglang:num_queue_reqs", "Queued requests.", state.waiting)
                    yield gauge("sglang:token_usage", "The token usage.", round(state.kv_usage(), 2))
                    yield gauge("sglang:num_used_tokens", "The number of used tokens.", state.used_tokens())
                    yield gauge(
                        "sglang:max_total_num_tokens",
                        "Maximum total number of tokens in the KV cache.",
                        profile.exported_capacity_tokens,
                    )
                    warmup = WARMUP_PROMPT_TOKENS if profile.warmup_s and not state.warming_up else 0
                    yield counter("sglang:prompt_tokens", "Prompt tokens.", cache.queries + warmup)
                    yield counter("sglang:cached_tokens", "Prefix-cache hit tokens.", cache.hits)
                    yield counter("sglang:num_requests", "Finished requests.", state.finished_requests)
                    yield counter("sglang:generation_tokens", "Generation tokens.", state.generation_tokens)
                    yield counter("sglang:num_retracted_requests", "Retracted requests.", 0)
                    yield counter(
                        "sglang:evicted_tokens",
                        "Evicted tokens.",
                        cache.evicted_blocks * cache.block_size,
                        {"cache_type": "device"},
                    )

        registry = CollectorRegistry()
        registry.register(Collector())
        return generate_latest(registry)
