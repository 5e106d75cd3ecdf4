"""N engine replicas behind a router: which replica each request goes to, and the replicas stepped side by side.

The policies, as vllm-router (`--policy`) and sglang-router name them:
- round_robin: the k-th request to arrive goes to replica k mod N;
- consistent_hash: session affinity, every request of a session to one replica (a stable hash of the session id:
  like any hash, it spreads few sessions unevenly);
- cache_aware: prefix-aware routing as vllm-router's cache_aware policy does it: each replica's prompts routed so far
  (the router's own approximate tree, not the replica's cache: it never learns what the replica evicted); a request
  goes to the replica whose routed prompts share its longest prefix when that covers more than `cache_threshold`
  (0.3) of its prompt, else to the replica that was routed the fewest tokens; unless the load (requests in flight) is
  out of balance (the busiest has more than `balance_abs_threshold` (64) more than the idlest and more than
  `balance_rel_threshold` (1.5) times as many), when the idlest takes it. Left out: the router's own eviction of its
  tree (every 120 s, past 2^25 characters), and its matching by characters rather than tokens.

With one replica every policy is the same.
"""

from __future__ import annotations

import heapq
import math
from functools import partial
from typing import Callable, Optional

import numpy as np
import xxhash

from ..errors import SpecError
from .engine_base import Engine, Served

__all__ = ["POLICIES", "Fleet", "Router"]

POLICIES = ("round_robin", "consistent_hash", "cache_aware")
CACHE_THRESHOLD = 0.3
BALANCE_ABS_THRESHOLD = 64
BALANCE_REL_THRESHOLD = 1.5


class Router:
    def __init__(self, policy: str, replicas: int, block_size: int = 1) -> None:
        if policy not in POLICIES:
            raise ValueError(f"unknown routing policy {policy!r}; use one of {', '.join(POLICIES)}")
        self.policy, self.replicas, self.block_size = policy, replicas, block_size
        self._next = 0
        self._routed = [np.zeros(0, dtype=bool) for _ in range(replicas)]  # block id -> routed there (cache_aware)
        self._routed_tokens = [0] * replicas

    def pick(self, served: Served, session: str, load: list[int]) -> int:
        """The replica for a request of `session`; `load` is each replica's requests in flight."""
        if self.replicas == 1:
            return 0
        if self.policy == "round_robin":
            self._next += 1
            return (self._next - 1) % self.replicas
        if self.policy == "consistent_hash":
            return xxhash.xxh64_intdigest(session.encode()) % self.replicas
        return self._cache_aware(served, load)

    def _cache_aware(self, served: Served, load: list[int]) -> int:
        busiest, idlest = max(load), min(load)
        if busiest - idlest > BALANCE_ABS_THRESHOLD and busiest > BALANCE_REL_THRESHOLD * idlest:
            chosen = load.index(idlest)
        else:
            matches = [self._match(routed, served.blocks) for routed in self._routed]
            best = max(matches)
            if best and best * self.block_size > CACHE_THRESHOLD * served.prompt:
                chosen = matches.index(best)
            else:
                chosen = self._routed_tokens.index(min(self._routed_tokens))
        self._remember(chosen, served)
        return chosen

    @staticmethod
    def _match(routed: np.ndarray, blocks: np.ndarray) -> int:
        if not len(blocks):
            return 0
        found = np.zeros(len(blocks), dtype=bool)
        inside = blocks < len(routed)
        found[inside] = routed[blocks[inside]]
        return len(blocks) if found.all() else int(np.argmin(found))

    def _remember(self, replica: int, served: Served) -> None:
        blocks = served.blocks
        if len(blocks):
            top = int(blocks.max()) + 1
            routed = self._routed[replica]
            if top > len(routed):
                grown = np.zeros(max(top, 2 * len(routed)), dtype=bool)
                grown[: len(routed)] = routed
                self._routed[replica] = routed = grown
            routed[blocks] = True
        self._routed_tokens[replica] += served.prompt

    def forget(self, blocks: np.ndarray) -> None:
        """Block ids that will name other blocks: no longer a routed prefix anywhere."""
        for routed in self._routed:
            routed[blocks[blocks < len(routed)]] = False


def _admitted(on_admit: Callable[[Served, float, int], None], index: int, served: Served, t: float) -> None:
    on_admit(served, t, index)


class Fleet:
    """The replicas a replay sends to, and the router in front of them. The replay calls `submit` for each arrival
    and steps the replicas: `next_time` says when the next thing happens on their side, `advance` does it.

    A request reaches its replica's scheduler once the replica's front end has rendered and tokenized it,
    ServiceModel.ingest_seconds of work: one request at a time (`serial_ingest`: the API server's event loop), so
    that requests sent together reach the scheduler one after the other and may land in different steps; or all at
    once, each after its own time (SGLang renders on a thread pool; which of two requests sent together is first
    then depends on their lengths). Which one a server does on shared cores is not known here: the point takes the
    first, the band both."""

    def __init__(self, engines: list[Engine], router: Optional[Router] = None, *, serial_ingest: bool = True) -> None:
        self.engines = engines
        self.router = router or Router("round_robin", len(engines), engines[0].block_size)
        self._ready: dict[int, float] = {}  # replica -> when it may begin its next step
        self._in_flight = [0] * len(engines)
        self._ingesting: list[tuple[float, int, int, Served]] = []  # (when it reaches the scheduler, order, replica)
        self._front_free = [0.0] * len(engines)  # when each replica's front end is next free
        self._serial = serial_ingest
        self._order = 0

    def connect(self, on_admit: Callable[[Served, float, int], None], on_done: Callable[[Served, float], None]) -> None:
        for index, engine in enumerate(self.engines):
            engine.on_admit = partial(_admitted, on_admit, index)
            engine.on_done = partial(self._done, index, on_done=on_done)

    def _done(self, index: int, served: Served, t: float, *, on_done: Callable[[Served, float], None]) -> None:
        self._in_flight[index] -= 1
        on_done(served, t)

    def submit(self, served: Served, session: str, now: float) -> int:
        index = self.router.pick(served, session, self._in_flight)
        self._in_flight[index] += 1
        engine = self.engines[index]
        cost = engine.service.ingest_seconds(served.prompt)
        if cost <= 0:
            self._reach(index, served, now)
            return index
        done = (max(now, self._front_free[index]) if self._serial else now) + cost
        self._front_free[index] = done
        heapq.heappush(self._ingesting, (done, self._order, index, served))
        self._order += 1
        return index

    def _reach(self, index: int, served: Served, now: float) -> None:
        engine = self.engines[index]
        engine.submit(served, now)
        if engine.idle and index not in self._ready:
            self._ready[index] = now + engine.wake_delay()

    def next_time(self) -> tuple[float, int]:
        """(when, what): 0 a step ends, 1 a request reaches a scheduler, 2 an idle replica begins a step; (inf, 0)
        when nothing is pending."""
        ends = [(e.step_end, 0) for e in self.engines if e.step_end is not None]
        begins = [(t, 2) for t in self._ready.values()]
        reaching = [(self._ingesting[0][0], 1)] if self._ingesting else []
        return min(ends + begins + reaching, default=(math.inf, 0))

    def advance(self) -> None:
        """Do the next thing on the replicas' side: end the earliest step, hand a tokenized request to its
        scheduler, or begin the steps that are due."""
        when, what = self.next_time()
        if what == 1:
            _, _, index, served = heapq.heappop(self._ingesting)
            self._reach(index, served, when)
            return
        if what == 0:
            index = min(
                (i for i, e in enumerate(self.engines) if e.step_end == when), default=0
            )  # the lowest replica first
            engine = self.engines[index]
            t = engine.finish()
            if engine.has_work:
                self._ready[index] = t
            return
        for index in sorted(i for i, t in self._ready.items() if t == when):
            del self._ready[index]
            engine = self.engines[index]
            engine.begin(when)
            if engine.idle and engine.has_work:
                raise SpecError(
                    f"a request of {engine.waiting[0].prompt:,} prompt tokens and up to {engine.waiting[0].max_new:,} "
                    f"more can never be admitted into a KV cache of {engine.cache.capacity_tokens:,} tokens "
                    f"under {engine.rules.engine}'s rules; give a larger --kv-cache-tokens or --kv-cache-gib"
                )

    def forget(self, blocks: np.ndarray) -> None:
        for engine in self.engines:
            engine.forget(blocks)
        self.router.forget(blocks)

    @property
    def caches(self):
        return [engine.cache for engine in self.engines]
