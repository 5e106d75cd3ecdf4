"""The order in which a config's replay sends its requests, against simulated engines (engine.py, routing.py).

inference-perf's trace_session_replay, as read off 0.7.0: the trace files in sorted order are shuffled once with
`random.seed(base_seed)`; the first `num_sessions` slots run. A new session starts when fewer than
`concurrent_sessions` are active and, with a `session_rate`, no sooner than 1/rate after the previous one. In a
session, a request starts when all its predecessors have ended and its recorded wait (capped at `max_wait_ms`) has
passed; branches with the same predecessor run at the same time.

Each request goes to the fleet (one engine, or replicas behind a router) when it starts; the engine admits it when
its scheduler does (rules.py), which is when its hit is decided, and answers when it has generated its output. So
the replay's order and the engine's steps decide together what overlaps with what.

`Jitter` replays the same thing with seeded perturbations: each request reaches the engine a random few
milliseconds late, and each step lasts a random few percent more or less. Where the outcome depends on how
concurrent requests interleave, the replays differ; their spread is the band (analyze.py).
"""

from __future__ import annotations

import heapq
import math
import random
from dataclasses import dataclass, field, replace
from typing import Callable, Iterator, Optional, Sequence, Union

import numpy as np

from ..formats.rows import replay_slots  # the client's shuffle: the dataset file's module owns it
from .cache import BlockCache
from .engine_base import Served
from .engine_models import make_engine
from .routing import Fleet
from .rules import ENGINE_RULES, SchedulerSettings
from .step_time import DEFAULT_DECODE_TOKENS_PER_S, DEFAULT_PREFILL_TOKENS_PER_S, ServiceModel

__all__ = [
    "DEFAULT_DECODE_TOKENS_PER_S",
    "DEFAULT_PREFILL_TOKENS_PER_S",
    "Jitter",
    "Load",
    "PlannedRequest",
    "RequestOutcome",
    "ServiceModel",
    "replay",
    "replay_slots",
    "simulate",
    "single_engine",
]


@dataclass(frozen=True)
class Load:
    concurrent_sessions: int
    num_sessions: int
    session_rate: Optional[float] = None
    base_seed: int = 42
    max_wait_ms: int = 15000  # inference-perf's default cap on a recorded wait


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
    max_tokens: Optional[int] = None  # what the request asks for (None: its output); SGLang reserves room for it


@dataclass(frozen=True)
class RequestOutcome:
    slot: int
    file_index: int  # the session's trace file, in sorted order
    event_id: str
    label: str
    prompt_tokens: int
    cached_tokens: int
    start_s: float  # when the client sent it
    admitted_s: Optional[float] = None  # when the engine first admitted it (its hit was decided then)
    first_token_s: Optional[float] = None
    end_s: Optional[float] = None
    replica: int = 0


@dataclass(frozen=True)
class Jitter:
    """Seeded perturbations of a replay: each request reaches the engine up to `arrival_s` late (half a delay of its
        session's, the same for all its requests, half its own), an idle engine
        starts its next step up to `wake_s` after a request reaches it (requests that arrive meanwhile join that step),
        both uniform; each step lasts a lognormal factor, of coefficient of variation `step_cv`, of its length; and the
    server's front end tokenizes requests one at a time or all at once (`serial_ingest`)."""

    seed: int
    arrival_s: float = 0.01
    wake_s: float = 0.01
    step_cv: float = 0.1
    serial_ingest: bool = True  # the front end tokenizes one request at a time (routing.Fleet), or all at once


def single_engine(
    cache: BlockCache,
    service: ServiceModel = ServiceModel(),
    *,
    engine: Optional[str] = None,
    settings: Optional[SchedulerSettings] = None,
    jitter: Optional[Jitter] = None,
) -> Fleet:
    """One engine with `cache` (its rules: `engine`, else the cache's publication rule tells), with no scheduler
    limits unless `settings` gives them."""
    name = engine or ("sglang" if cache.publish_after_prefill else "vllm")
    noise = random.Random(jitter.seed + 1) if jitter else None
    return Fleet(
        [
            make_engine(
                ENGINE_RULES[name],
                settings or SchedulerSettings(),
                cache,
                service,
                noise=noise,
                step_cv=jitter.step_cv if jitter else 0.0,
                wake_s=jitter.wake_s if jitter else 0.0,
            )
        ],
        serial_ingest=jitter.serial_ingest if jitter else True,
    )


def simulate(
    sessions: Callable[[int], Sequence[PlannedRequest]],
    slots: list[int],
    load: Load,
    fleet: Union[Fleet, BlockCache],
    *,
    model: ServiceModel = ServiceModel(),
    jitter: Optional[Jitter] = None,
) -> list[RequestOutcome]:
    """Every request of the slots' sessions, in the order they were first admitted, with the cached tokens it found
    and when it started, was admitted, got its first token and ended. A bare BlockCache is one engine with no
    scheduler limits at the `model`'s speeds."""
    if isinstance(fleet, BlockCache):
        fleet = single_engine(fleet, model, jitter=jitter)
    outcomes: list[RequestOutcome] = []
    position: dict[tuple[int, str], int] = {}

    def started(outcome: RequestOutcome, _request: PlannedRequest) -> None:
        position[(outcome.slot, outcome.event_id)] = len(outcomes)
        outcomes.append(outcome)

    def finished(outcome: RequestOutcome, _request: PlannedRequest) -> None:
        outcomes[position[(outcome.slot, outcome.event_id)]] = outcome

    for _ in replay(sessions, slots, load, fleet, on_start=started, on_finish=finished, jitter=jitter):
        pass
    return outcomes


def replay(
    sessions: Callable[[int], Sequence[PlannedRequest]],
    slots: list[int],
    load: Load,
    fleet: Fleet,
    *,
    on_start: Callable[[RequestOutcome, PlannedRequest], None],
    on_end: Callable[[int], None] = lambda file_index: None,
    on_finish: Optional[Callable[[RequestOutcome, PlannedRequest], None]] = None,
    jitter: Optional[Jitter] = None,
) -> Iterator[int]:
    """simulate, one step at a time: each request is handed to `on_start` when the engine first admits it (its hit
    decided) and to `on_finish` when it ends, each session's file index to `on_end` when its last request has ended,
    and after each step that started sessions the generator yields how many slots it has started, so that several
    replays can run side by side over one read of their sessions (`sessions(file index)` is called once per slot,
    when the slot starts)."""
    return _Replay(
        sessions, slots, load, fleet, on_start=on_start, on_end=on_end, on_finish=on_finish, jitter=jitter
    ).run()


@dataclass
class _Session:
    """A session under way: its requests by event id, each one's successors, how many are left and which ended."""

    requests: dict[str, PlannedRequest]
    successors: dict[str, list[str]]
    left: int
    done: set[str] = field(default_factory=set)


class _Replay:
    """One replay's client: its events in time order (sessions to dispatch, requests to send), the sessions under
    way, and where each request went; the fleet reports back through `_admitted` and `_done`."""

    def __init__(
        self,
        sessions: Callable[[int], Sequence[PlannedRequest]],
        slots: list[int],
        load: Load,
        fleet: Fleet,
        *,
        on_start: Callable[[RequestOutcome, PlannedRequest], None],
        on_end: Callable[[int], None],
        on_finish: Optional[Callable[[RequestOutcome, PlannedRequest], None]],
        jitter: Optional[Jitter],
    ) -> None:
        self.sessions, self.slots, self.load, self.fleet = sessions, slots, load, fleet
        self.on_start, self.on_end, self.on_finish, self.jitter = on_start, on_end, on_finish, jitter
        self.heap: list[tuple[float, int, str, tuple]] = []
        self.counter = 0  # ties in time go in the order they were pushed
        self.delay = random.Random(jitter.seed) if jitter and jitter.arrival_s > 0 else None
        self.interval = 1.0 / load.session_rate if load.session_rate else 0.0
        self.next_slot, self.active, self.next_dispatch = 0, 0, 0.0
        self.state: dict[int, _Session] = {}
        self.arrivals = 0
        self.session_late: dict[int, float] = {}
        self.replicas: dict[tuple[int, str], int] = {}

    def run(self) -> Iterator[int]:
        fleet = self.fleet
        fleet.connect(self._admitted, self._done)
        self._dispatch(0.0)
        started = 0
        while True:
            if self.next_slot != started:
                started = self.next_slot
                yield started
            client = self.heap[0][0] if self.heap else math.inf
            when, what = fleet.next_time()
            if client == math.inf and when == math.inf:
                break
            # at one instant: steps end first (their requests' successors may start now), then the client's events,
            # then the steps that begin (so they see every request that arrived by then)
            if when < client or (when == client and what == 0):
                fleet.advance()
                continue
            t, _, kind, payload = heapq.heappop(self.heap)
            if kind == "dispatch":
                self._dispatch(t)
            else:
                self._send(t, *payload)

    def _push(self, t: float, kind: str, payload: tuple) -> None:
        heapq.heappush(self.heap, (t, self.counter, kind, payload))
        self.counter += 1

    def _wait_s(self, request: PlannedRequest, slot: int) -> float:
        """The recorded wait, capped; under jitter, plus a delay of the session's own (the client worker it runs on:
        the same every request) and one of the request's, half of arrival_s at most each."""
        late = 0.0
        if self.delay is not None and self.jitter is not None:
            if slot not in self.session_late:
                self.session_late[slot] = self.delay.uniform(0.0, self.jitter.arrival_s / 2)
            late = self.session_late[slot] + self.delay.uniform(0.0, self.jitter.arrival_s / 2)
        return min(request.wait_ms, self.load.max_wait_ms) / 1000.0 + late

    def _dispatch(self, t: float) -> None:
        """Start sessions while the load allows; one held back by the session rate is dispatched again later."""
        while self.next_slot < len(self.slots) and self.active < self.load.concurrent_sessions:
            if t < self.next_dispatch:
                self._push(self.next_dispatch, "dispatch", ())
                return
            slot = self.next_slot
            self.next_slot += 1
            self.active += 1
            self._start_session(slot, t)
            self.next_dispatch = max(self.next_dispatch + self.interval, t) if self.interval else t

    def _start_session(self, slot: int, t: float) -> None:
        requests = {r.event_id: r for r in self.sessions(self.slots[slot])}
        successors: dict[str, list[str]] = {e: [] for e in requests}
        for r in requests.values():
            for p in r.predecessors:
                if p in successors:
                    successors[p].append(r.event_id)
        self.state[slot] = _Session(requests, successors, len(requests))
        for r in requests.values():
            if not any(p in requests for p in r.predecessors):
                self._push(t + self._wait_s(r, slot), "start", (slot, r.event_id))
        if not requests:
            self._finish_session(slot, t)

    def _finish_session(self, slot: int, t: float) -> None:
        del self.state[slot]
        self.active -= 1
        self.on_end(self.slots[slot])
        self._dispatch(t)

    def _send(self, t: float, slot: int, event_id: str) -> None:
        """The client sends a request: the fleet routes it to a replica."""
        request = self.state[slot].requests[event_id]
        max_new = request.max_tokens if request.max_tokens is not None else request.output_tokens
        served = Served(
            (slot, event_id, request),
            request.blocks,
            prompt=request.prompt_tokens,
            output=request.output_tokens,
            max_new=max_new,
            arrival=t,
            seq=self.arrivals,
        )
        self.arrivals += 1
        self.replicas[(slot, event_id)] = self.fleet.submit(served, f"{self.slots[slot]}", t)

    def _outcome(self, served: Served) -> RequestOutcome:
        slot, event_id, request = served.ref
        return RequestOutcome(
            slot, self.slots[slot], event_id, request.label, request.prompt_tokens, served.hit or 0, served.arrival
        )

    def _admitted(self, served: Served, t: float, replica: int) -> None:
        self.on_start(replace(self._outcome(served), admitted_s=t, replica=replica), served.ref[2])

    def _done(self, served: Served, t: float) -> None:
        slot, event_id, request = served.ref
        if self.on_finish is not None:
            outcome = replace(
                self._outcome(served),
                admitted_s=served.admitted_s,
                first_token_s=served.first_token_s,
                end_s=t,
                replica=self.replicas[(slot, event_id)],
            )
            self.on_finish(outcome, request)
        session = self.state[slot]
        session.done.add(event_id)
        session.left -= 1
        for successor in session.successors[event_id]:
            nxt = session.requests[successor]
            if all(p in session.done or p not in session.requests for p in nxt.predecessors):
                self._push(t + self._wait_s(nxt, slot), "start", (slot, successor))
        if session.left == 0:
            self._finish_session(slot, t)
