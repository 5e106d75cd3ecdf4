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

A capacity known by construction (`slots`, `service_s`; off by default): a server K requests wide, each request's
first token waits `service_s` while at most K are in flight and `service_s * n / K` when n are (n counted at its
arrival, itself included), as a processor shared K ways. With N sessions each sending its next request as the last
ends, every request sees n = N, so a TTFT target T is met by N <= T * K / service_s sessions and broken past it,
whatever order the requests arrive in (a FIFO queue K wide would not say that: its waits depend on how the
sessions' requests fall against each other). The capacity search's test (tests/e2e/test_e2e_capacity.py) finds it.
"""

from __future__ import annotations

import asyncio
import random
import time
from functools import partial
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
    slots: Optional[int] = None  # a server this many requests wide: the first token waits longer past it
    service_s: float = 0.0  # with slots: the first token's wait while no more than `slots` are in flight

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
            if self.profile.slots:  # outside the prefill lane: the K-wide server's share, as its docstring says
                in_flight = self.running + self.waiting
                await asyncio.sleep(self.profile.service_s * max(1.0, in_flight / self.profile.slots))
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
        from prometheus_client.core import GaugeMetricFamily

        state = self

        class Collector:
            def collect(self):
                yield GaugeMetricFamily(
                    "process_start_time_seconds",
                    "Start time of the process since unix epoch in seconds.",
                    value=state.process_start,
                )
                yield from state._vllm_families() if state.profile.flavour == "vllm" else state._sglang_families()

        registry = CollectorRegistry()
        registry.register(Collector())
        return generate_latest(registry)

    def _family(self, counter: bool, name: str, doc: str, value: float, *, extra: Optional[dict] = None):
        """One sample under the engine's labels (and `extra`), as a counter or a gauge."""
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        labels = {"model_name": self.model_name, **({"engine": "0"} if self.profile.flavour == "vllm" else {})}
        names = {**labels, **(extra or {})}
        family = (CounterMetricFamily if counter else GaugeMetricFamily)(name, doc, labels=list(names))
        family.add_metric(list(names.values()), value)
        return family

    def _vllm_families(self) -> list:
        from prometheus_client.core import GaugeMetricFamily

        cache, block = self.cache, self.cache.block_size
        names = {  # vLLM's cache config: the values are labels, the sample 1
            "block_size": str(block),
            "num_gpu_blocks": str(self.profile.exported_capacity_tokens // block),
            "enable_prefix_caching": "True",
        }
        config = GaugeMetricFamily(
            "vllm:cache_config_info", "Information of the LLMEngine CacheConfig", labels=list(names)
        )
        config.add_metric(list(names.values()), 1.0)
        gauge, counter = partial(self._family, False), partial(self._family, True)
        return [
            config,
            gauge("vllm:num_requests_running", "Running requests.", self.running),
            gauge("vllm:num_requests_waiting", "Waiting requests.", self.waiting),
            gauge("vllm:kv_cache_usage_perc", "KV-cache usage, 1 is full.", self.kv_usage()),
            counter("vllm:prefix_cache_queries", "Prefix cache queries (tokens).", cache.queries),
            counter("vllm:prefix_cache_hits", "Prefix cache hits (tokens).", cache.hits),
            counter("vllm:num_preemptions", "Preemptions.", 0),
            counter("vllm:prompt_tokens", "Prefill tokens.", self.prompt_tokens),
            counter("vllm:request_success", "Finished requests.", self.finished_requests),
            counter("vllm:generation_tokens", "Generation tokens.", self.generation_tokens),
        ]

    def _sglang_families(self) -> list:
        cache, profile = self.cache, self.profile
        gauge, counter = partial(self._family, False), partial(self._family, True)
        warmup = WARMUP_PROMPT_TOKENS if profile.warmup_s and not self.warming_up else 0
        return [
            gauge("sglang:num_running_reqs", "Running requests.", self.running),
            gauge("sglang:num_queue_reqs", "Queued requests.", self.waiting),
            gauge("sglang:token_usage", "The token usage.", round(self.kv_usage(), 2)),
            gauge("sglang:num_used_tokens", "The number of used tokens.", self.used_tokens()),
            gauge(
                "sglang:max_total_num_tokens",
                "Maximum total number of tokens in the KV cache.",
                profile.exported_capacity_tokens,
            ),
            counter("sglang:prompt_tokens", "Prompt tokens.", cache.queries + warmup),
            counter("sglang:cached_tokens", "Prefix-cache hit tokens.", cache.hits),
            counter("sglang:num_requests", "Finished requests.", self.finished_requests),
            counter("sglang:generation_tokens", "Generation tokens.", self.generation_tokens),
            counter("sglang:num_retracted_requests", "Retracted requests.", 0),
            counter(
                "sglang:evicted_tokens",
                "Evicted tokens.",
                cache.evicted_blocks * cache.block_size,
                extra={"cache_type": "device"},
            ),
        ]
