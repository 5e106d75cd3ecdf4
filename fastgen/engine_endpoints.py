"""What fastgen knows about each inference engine it runs the bakeoff against: how to empty its prefix cache, and
what its Prometheus `/metrics` calls the quantities the benchmark asks about.

One entry per engine: `bakeoff` resets through it and samples `/metrics` whole; `results` reads the samples back
through `Engine.metrics`. A third engine is one more `Engine(...)` in ENGINES.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

__all__ = ["ENGINES", "Engine", "METRIC_MEANINGS", "engine_named"]

# The quantities a report shows from the sampled metrics, and what each means.
METRIC_MEANINGS = {
    "kv_usage": "fraction of the KV cache in use (0-1)",
    "kv_used_tokens": "KV cache tokens in use by running requests (a count)",
    "cache_queries": "prompt tokens looked up in the prefix cache (counter)",
    "cache_hits": "prompt tokens found in the prefix cache (counter)",
    "requests": "requests answered (counter)",
    "prompt_tokens": "prompt tokens of the requests (counter)",
    "running": "requests running",
    "waiting": "requests waiting for a slot",
    "preemptions": "requests preempted (vLLM) or retracted (SGLang) to free KV blocks (counter)",
    "evictions": "KV blocks evicted from the prefix cache (counter)",
}


@dataclass(frozen=True)
class Engine:
    name: str
    reset_path: str  # POST here empties the prefix cache
    reset_hint: str  # what to do when the server does not offer reset_path
    busy_status: Optional[int]  # the status the reset answers while requests run (then: wait and retry)
    cache_report_flag: str  # without it the server sends no cached-token counts
    info_path: str  # GET here answers JSON with the server's "version" (SGLang's holds its KV size too)
    reset_unverified_hint: str  # what to do when a reset answered but left the prefix cache as it was
    # quantity of METRIC_MEANINGS -> sample names (as prometheus_client's parser names samples), first found wins
    metrics: dict[str, tuple[str, ...]] = field(default_factory=dict)
    model_owner: str = ""  # `owned_by` of its /v1/models entries, which tells the engine apart
    reset_wait_query: Optional[str] = None  # the reset's query parameter that makes the engine wait for idle itself
    tool_choice_fix: str = ""  # what makes the server hold a named tool_choice (answer the forced tool's name)
    metrics_flag: Optional[str] = None  # the flag that turns its /metrics on (None: always served)
    # the --tool-call-parser fastgen's runs use with it (for Qwen-style models), and the markers it finds calls by:
    # special tokens the served model's tokenizer must have
    tool_parser: str = "hermes"
    tool_parser_tokens: tuple[str, ...] = ("<tool_call>", "</tool_call>")
    # GET here answers 503 while the server is still starting though /v1/models already answers (None: /v1/models
    # answering means started)
    ready_path: Optional[str] = None
    # the step its kv_usage gauge is rounded to (None: not rounded); a rounded gauge is no count of tokens
    kv_usage_step: Optional[float] = None

    def metric(self, sample: dict[str, float], quantity: str) -> Optional[float]:
        """The value of `quantity` in one sample of /metrics (sums over label sets), or None if not exported."""
        for name in self.metrics.get(quantity, ()):
            if name in sample:
                return sample[name]
        return None


VLLM = Engine(
    name="vllm",
    reset_path="/reset_prefix_cache",
    reset_hint="vLLM serves POST /reset_prefix_cache only with VLLM_SERVER_DEV_MODE=1 in its environment; restart it "
    "so, or pass --no-reset to run without emptying the cache between configs",
    busy_status=None,  # always 200; with blocks still held it silently resets nothing, so reset when idle
    cache_report_flag="--enable-prompt-tokens-details",
    info_path="/version",
    reset_unverified_hint="vLLM empties nothing while a request holds blocks, nor a KV connector's cache (LMCache, "
    "CPU offloading): stop any other client of it, restart it without a KV connector, or pass "
    "--no-reset (hit ratios then carry over)",
    metrics={
        "kv_usage": ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"),  # the second before late 2025
        "cache_queries": ("vllm:prefix_cache_queries_total",),
        "cache_hits": ("vllm:prefix_cache_hits_total",),
        "requests": ("vllm:request_success_total",),
        "prompt_tokens": ("vllm:prompt_tokens_total",),
        "running": ("vllm:num_requests_running",),
        "waiting": ("vllm:num_requests_waiting",),
        "preemptions": ("vllm:num_preemptions_total",),
    },
    model_owner="vllm",
    # a named tool_choice without a tool-call parser is answered HTTP 400 ("requires --tool-call-parser to be set")
    tool_choice_fix="restart it with --enable-auto-tool-choice --tool-call-parser <your model's>",
)

SGLANG = Engine(
    name="sglang",
    reset_path="/flush_cache",
    reset_hint="SGLang serves POST /flush_cache on its HTTP server; check --url points at it (not at a router), or "
    "pass --no-reset to run without emptying the cache between configs",
    busy_status=400,  # "Cache not flushed. Please check the server log ..." while requests run
    cache_report_flag="--enable-cache-report",
    info_path="/get_server_info",
    reset_unverified_hint="SGLang flushes nothing while requests run, nor its hierarchical cache: stop any other "
    "client of it, restart it without --enable-hierarchical-cache, or pass --no-reset (hit "
    "ratios then carry over)",
    metrics={
        "kv_usage": ("sglang:token_usage",),
        "kv_used_tokens": ("sglang:num_used_tokens",),
        "cache_queries": ("sglang:prompt_tokens_total",),
        "cache_hits": ("sglang:cached_tokens_total",),
        "requests": ("sglang:num_requests_total",),
        "prompt_tokens": ("sglang:prompt_tokens_total",),
        "running": ("sglang:num_running_reqs",),
        "waiting": ("sglang:num_queue_reqs",),
        # (sglang:num_retracted_reqs is a gauge reset at every stats log: not a count over the run)
        "preemptions": ("sglang:num_retracted_requests_total",),
        "evictions": ("sglang:evicted_tokens_total",),
    },
    model_owner="sglang",
    # POST /flush_cache?timeout=S: SGLang waits up to S seconds for idle, then flushes (400 "Timed out waiting for
    # idle state." past it); an older SGLang ignores the parameter and answers 400 at once while busy
    reset_wait_query="timeout",
    # seen with SGLang 0.5.23: the hermes parser constrains the answer to any of the request's tools, whatever
    # SGLANG_TOOL_STRICT_LEVEL says (a trained model mostly follows the prompt, a random one names any); qwen3_coder
    # builds a grammar that holds the forced name
    tool_choice_fix="restart it with a --tool-call-parser that holds a named tool_choice (with SGLang 0.5.23, "
    "qwen3_coder held it; hermes did not, even with SGLANG_TOOL_STRICT_LEVEL=2)",
    metrics_flag="--enable-metrics",
    tool_parser="qwen3_coder",
    # SGLang answers /v1/models before its startup warmup request ("The capital city of France is", 8 tokens out)
    # is answered, and /health 503 until then; its counters count that request, so one that ends inside the first
    # run is counted in it (seen once in e2e-pair: 7 prompt tokens more than the run's requests)
    ready_path="/health",
    # sglang:token_usage is round(usage, 2) (0.5.23's pool_stats_observer): 1 % of a 2 M-token pool is 21 K tokens;
    # sglang:num_used_tokens counts them
    kv_usage_step=0.01,
)

ENGINES: dict[str, Engine] = {engine.name: engine for engine in (VLLM, SGLANG)}


def engine_named(name: str) -> Engine:
    try:
        return ENGINES[name]
    except KeyError:
        raise ValueError(f"unknown engine {name!r}; use one of: {', '.join(ENGINES)}") from None
