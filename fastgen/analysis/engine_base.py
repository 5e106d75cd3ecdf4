"""The server side of the replay: one engine replica serving requests in steps, the mechanics vLLM's and SGLang's
models share (engine_vllm.py, engine_sglang.py; engine_models.py picks one).

rules.py names each rule and the source it follows; the engine models apply them. A step runs one batch and lasts what
the ServiceModel says its tokens cost (prefill tokens / prefill speed, plus one decode interval when it decodes); a
request that arrives during a step waits for the next. What a request hits is decided when it is first admitted:
the cache as the steps before it (and, for vLLM, the requests scheduled before it in the same step) left it.

Stretches where nothing but decoding can happen (no request waiting that could be admitted, no prefill under way)
are run as one long step of k decode intervals, k the steps until the first request finishes or the cache runs out
of room for the tokens they generate; an arrival cuts such a run short at the next step boundary. So the work is per
event, not per generated token, and a replay of the full default set stays cheap.
"""

from __future__ import annotations

import math
import random
from collections import deque
from typing import Callable, Optional

import numpy as np

from .cache import Admission, BlockCache
from .rules import CacheRules, SchedulerSettings
from .step_time import ServiceModel

__all__ = ["Engine", "Served"]


class Served:
    """A request inside an engine: its prompt's blocks and sizes, and how far it has got."""

    __slots__ = (
        "ref",
        "blocks",
        "prompt",
        "output",
        "max_new",
        "arrival",
        "seq",
        "computed",
        "generated",
        "hold",
        "hit",
        "admitted_s",
        "first_token_s",
        "preemptions",
    )

    def __init__(
        self, ref, blocks: np.ndarray, *, prompt: int, output: int, max_new: int, arrival: float, seq: int
    ) -> None:
        self.ref = ref  # the caller's handle
        self.blocks, self.prompt = blocks, prompt
        self.output = max(1, output)  # an engine generates at least one token
        self.max_new = max(self.output, max_new)  # what the request asked for (SGLang reserves room for it)
        self.arrival, self.seq = arrival, seq
        self.computed = 0  # tokens of its sequence whose KV is computed (or, in vLLM, scheduled)
        self.generated = 0
        self.hold: Optional[Admission] = None
        self.hit: Optional[int] = None  # tokens found cached at its first admission
        self.admitted_s: Optional[float] = None
        self.first_token_s: Optional[float] = None
        self.preemptions = 0

    @property
    def tokens(self) -> int:
        return self.prompt + self.generated


class Engine:
    """One replica: a waiting queue, the running requests, a cache, and the step under way (if any).

    The driver (schedule.replay) calls `submit` for each arrival, `begin(now)` when the engine is free to start a
    step, and `finish()` at `step_end`; `on_admit(served, t)` and `on_done(served, t)` report back."""

    def __init__(
        self,
        rules: CacheRules,
        settings: SchedulerSettings,
        cache: BlockCache,
        service: ServiceModel,
        *,
        noise: Optional[random.Random] = None,
        step_cv: float = 0.0,
        wake_s: float = 0.0,
    ) -> None:
        self.rules, self.settings, self.cache, self.service = rules, settings, cache, service
        self.block_size = cache.block_size
        self.waiting: deque[Served] = deque()
        self.running: list[Served] = []
        self.step_end: Optional[float] = None  # when the step under way ends; None: idle
        self._step_start = 0.0
        self._apply: Callable[[float], None] = lambda _t: None
        self._run: Optional[tuple[int, float]] = None  # a decode run: (steps, seconds a step)
        self._noise, self._step_cv, self._wake_s = noise, step_cv, wake_s
        self.on_admit: Callable[[Served, float], None] = lambda _s, _t: None
        self.on_done: Callable[[Served, float], None] = lambda _s, _t: None
        self.steps = 0
        self.preempted = 0

    # --- the driver's side

    def submit(self, served: Served, now: float) -> None:
        """A request arrives: it waits for the next step. A decode run under way ends at the next step boundary when
        the arrival could change what that step does."""
        self.waiting.append(served)
        if self._run is not None and self.step_end is not None and self._arrival_matters():
            steps, interval = self._run
            done = max(1, math.ceil((now - self._step_start) / interval - 1e-9))
            if done < steps:
                self._run = (done, interval)
                self.step_end = self._step_start + done * interval

    def begin(self, now: float) -> None:
        """Start the next step at `now`, if there is work; else stay idle."""
        self.step_end = None
        self._run = None
        duration = self._form_step(now)
        if duration is None:
            return
        self.steps += 1
        self._step_start = now
        self.step_end = now + self._noisy(duration)
        if self._run is not None:
            steps, _ = self._run
            self._run = (steps, (self.step_end - now) / steps)

    def finish(self) -> float:
        """End the step under way: its effects happen now. Returns the time."""
        assert self.step_end is not None
        t = self.step_end
        self._apply(t)
        self.step_end = None
        self._run = None
        return t

    @property
    def idle(self) -> bool:
        return self.step_end is None

    @property
    def has_work(self) -> bool:
        return bool(self.waiting or self.running) or self._has_pending()

    def _has_pending(self) -> bool:
        return False

    def forget(self, blocks: np.ndarray) -> None:
        self.cache.forget(blocks)

    # --- shared mechanics

    def wake_delay(self) -> float:
        """How long an idle engine takes to start a step once a request has arrived (0 without noise): requests
        that arrive meanwhile join that step."""
        if self._noise is None or not self._wake_s:
            return 0.0
        return self._noise.uniform(0.0, self._wake_s)

    def _noisy(self, seconds: float) -> float:
        if self._noise is None or not self._step_cv:
            return seconds
        return seconds * self._noise.lognormvariate(-0.5 * self._step_cv**2, self._step_cv)

    def _arrival_matters(self) -> bool:
        return True

    def _first_admission(self, served: Served, hit_tokens: int, now: float) -> None:
        if served.hit is None:
            served.hit, served.admitted_s = hit_tokens, now
            self.on_admit(served, now)

    def _room(self) -> float:
        """Blocks the cache could give now (free, or cached and unused); infinite without a capacity."""
        room = self.cache.room()
        return math.inf if room is None else float(room)

    def _blocks_for(self, tokens: int) -> int:
        return -(-tokens // self.block_size)

    def _leave(self, served: Served, now: float) -> None:
        self._let_go(served)
        self.on_done(served, now)

    def _let_go(self, served: Served) -> None:
        """The request's hold on the cache released (what it published stays cached, evictable)."""
        if served.hold is not None:
            self.cache.release(served.hold)
            served.hold = None

    def _requeue(self, served: Served, *, front: bool) -> None:
        """A running request sent back to wait (vLLM's preemption, SGLang's retraction): its computed tokens are
        let go and computed again when it is admitted again, its hit already counted."""
        self._let_go(served)
        served.computed = 0
        served.preemptions += 1
        self.preempted += 1
        if front:
            self.waiting.appendleft(served)
        else:
            self.waiting.append(served)

    def _generated_one(self, served: Served, t: float) -> bool:
        """A step gave `served` its next token (its first: the time noted). True when that was its last."""
        served.generated += 1
        if served.first_token_s is None:
            served.first_token_s = t
        return served.generated >= served.output

    def _end_decoding(self, running: list[Served], steps: int, t: float) -> None:
        """`steps` decode steps of the running batch end at `t`: each request's tokens computed and generated, their
        blocks claimed, the finished ones gone. The room was there for every step (checked when the run began);
        taken now, nothing else ran."""
        for served in running:
            assert served.hold is not None
            served.computed += steps
            served.generated += steps
            self.cache.claim_to(served.hold, self._blocks_for(served.computed))
        for served in running:
            if served.generated >= served.output:
                self.running.remove(served)
                self._leave(served, t)

    def _form_step(self, now: float) -> Optional[float]:
        raise NotImplementedError
