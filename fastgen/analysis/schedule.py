"""The order in which a config's replay sends its requests, simulated against a BlockCache.

inference-perf's trace_session_replay, as read off 0.7.0: the trace files in sorted order are shuffled once with
`random.seed(base_seed)`; the first `num_sessions` slots run. A new session starts when fewer than
`concurrent_sessions` are active and, with a `session_rate`, no sooner than 1/rate after the previous one. In a
session, a request starts when all its predecessors have ended and its recorded wait (capped at `max_wait_ms`) has
passed; branches with the same predecessor run at the same time.

The service-time model is deliberately simple: a request's blocks are cached from the moment it starts (vLLM
registers them when it schedules them) or, under SGLang's rules, from the end of its prefill (rules.py); it takes
(uncached prompt tokens / prefill rate) to its first token, then
(recorded output tokens / decode rate) to its end, when its blocks may be evicted. No batching limits, no queueing
for the GPU: it decides what overlaps with what, which is what a cache's hits depend on, not how fast a server is.
"""

from __future__ import annotations

import heapq
import random
from dataclasses import dataclass
from typing import Callable, Iterator, Optional, Sequence

import numpy as np

from ..errors import SpecError
from .cache import BlockCache

__all__ = [
    "DEFAULT_DECODE_TOKENS_PER_S",
    "DEFAULT_PREFILL_TOKENS_PER_S",
    "Load",
    "PlannedRequest",
    "RequestOutcome",
    "ServiceModel",
    "replay",
    "replay_slots",
    "simulate",
]


@dataclass(frozen=True)
class Load:
    concurrent_sessions: int
    num_sessions: int
    session_rate: Optional[float] = None
    base_seed: int = 42
    max_wait_ms: int = 15000  # inference-perf's default cap on a recorded wait


DEFAULT_PREFILL_TOKENS_PER_S = 20000.0
DEFAULT_DECODE_TOKENS_PER_S = 50.0


@dataclass(frozen=True)
class ServiceModel:
    """How fast the simulated server serves one request: what decides which requests overlap. The defaults are a
    fast server; a slow one (`fastgen analyze --prefill-tokens-per-s/--decode-tokens-per-s`, or `--calibrate` from a
    bakeoff run) keeps more sessions running at once."""

    prefill_tokens_per_s: float = DEFAULT_PREFILL_TOKENS_PER_S
    decode_tokens_per_s: float = DEFAULT_DECODE_TOKENS_PER_S

    def __post_init__(self) -> None:
        for name in ("prefill_tokens_per_s", "decode_tokens_per_s"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and 0 < value < float("inf")):
                raise SpecError(f"a service model's {name} must be a positive number, got {value!r}")


@dataclass(frozen=True)
class PlannedRequest:
    event_id: str
    predecessors: tuple[str, ...]
    wait_ms: int
    blocks: np.ndarray  # the prompt's full blocks, as BlockIds ids of their chained hashes
    prompt_tokens: int
    output_tokens: int
    label: str  # turn or branch index, for per-turn tables
    tail: Optional[int] = None  # id of a trailing partial block (chained after the full ones), for hash_ids exports


@dataclass(frozen=True)
class RequestOutcome:
    slot: int
    file_index: int  # the session's trace file, in sorted order
    event_id: str
    label: str
    prompt_tokens: int
    cached_tokens: int
    start_s: float


def replay_slots(file_count: int, base_seed: int, num_sessions: int) -> list[int]:
    """File index (in sorted order) of each slot that runs: inference-perf's shuffle, then the first N."""
    order = list(range(file_count))
    random.Random(base_seed).shuffle(order)  # the same sequence as random.seed(base_seed); random.shuffle(order)
    return order[: min(num_sessions, file_count)]


def simulate(
    sessions: Callable[[int], Sequence[PlannedRequest]],
    slots: list[int],
    load: Load,
    cache: BlockCache,
    model: ServiceModel = ServiceModel(),
) -> list[RequestOutcome]:
    """Every request of the slots' sessions, in the order they start, with the cached tokens it found."""
    outcomes: list[RequestOutcome] = []
    for _ in replay(sessions, slots, load, cache, model, lambda outcome, _request: outcomes.append(outcome)):
        pass
    return outcomes


def replay(
    sessions: Callable[[int], Sequence[PlannedRequest]],
    slots: list[int],
    load: Load,
    cache: BlockCache,
    model: ServiceModel,
    on_start: Callable[[RequestOutcome, PlannedRequest], None],
    on_end: Callable[[int], None] = lambda file_index: None,
) -> Iterator[int]:
    """simulate, one step at a time: each request is handed to `on_start` as it starts, each session's file index
    to `on_end` when its last request has ended, and after each step that started sessions the generator yields how
    many slots it has started, so that several replays can run side by side over one read of their sessions
    (`sessions(file index)` is called once per slot, when the slot starts)."""
    heap: list[tuple[float, int, str, tuple]] = []
    counter = 0

    def push(t: float, kind: str, payload: tuple) -> None:
        nonlocal counter
        heapq.heappush(heap, (t, counter, kind, payload))
        counter += 1

    interval = 1.0 / load.session_rate if load.session_rate else 0.0
    next_slot, active, next_dispatch = 0, 0, 0.0
    state: dict[int, dict] = {}

    def wait_s(request: PlannedRequest) -> float:
        return min(request.wait_ms, load.max_wait_ms) / 1000.0

    def dispatch(t: float) -> None:
        nonlocal next_slot, active, next_dispatch
        while next_slot < len(slots) and active < load.concurrent_sessions:
            if t < next_dispatch:
                push(next_dispatch, "dispatch", ())
                return
            slot = next_slot
            next_slot += 1
            active += 1
            requests = {r.event_id: r for r in sessions(slots[slot])}
            successors: dict[str, list[str]] = {e: [] for e in requests}
            for r in requests.values():
                for p in r.predecessors:
                    if p in successors:
                        successors[p].append(r.event_id)
            state[slot] = {"requests": requests, "successors": successors, "left": len(requests), "done": set()}
            for r in requests.values():
                if not any(p in requests for p in r.predecessors):
                    push(t + wait_s(r), "start", (slot, r.event_id))
            if not requests:
                finish_session(slot, t)
            next_dispatch = max(next_dispatch + interval, t) if interval else t

    def finish_session(slot: int, t: float) -> None:
        nonlocal active
        del state[slot]
        active -= 1
        on_end(slots[slot])
        dispatch(t)

    dispatch(0.0)
    started = 0
    while heap:
        if next_slot != started:
            started = next_slot
            yield started
        t, _, kind, payload = heapq.heappop(heap)
        if kind == "dispatch":
            dispatch(t)
            continue
        slot, event_id = payload[0], payload[1]
        session = state[slot]
        request = session["requests"][event_id]
        if kind == "start":
            cached, admission = cache.admit(request.blocks, request.prompt_tokens)
            prefill = (request.prompt_tokens - cached) / model.prefill_tokens_per_s
            if cache.publish_after_prefill:  # SGLang: into the radix tree once computed (pushed before the end)
                push(t + prefill, "publish", (slot, event_id, admission))
            else:
                # vLLM registers a request's full blocks when it schedules them, before they are computed: a request
                # scheduled after it, even in the same step, hits them (measured: concurrent sessions share the prefix)
                cache.publish(admission, request.output_tokens)
            on_start(
                RequestOutcome(slot, slots[slot], event_id, request.label, request.prompt_tokens, cached, t), request
            )
            decode = request.output_tokens / model.decode_tokens_per_s
            push(t + prefill + decode, "end", (slot, event_id, admission))
        elif kind == "publish":
            cache.publish(payload[2], request.output_tokens)
        else:
            cache.release(payload[2])
            session["done"].add(event_id)
            session["left"] -= 1
            for successor in session["successors"][event_id]:
                nxt = session["requests"][successor]
                if all(p in session["done"] or p not in session["requests"] for p in nxt.predecessors):
                    push(t + wait_s(nxt), "start", (slot, successor))
            if session["left"] == 0:
                finish_session(slot, t)
