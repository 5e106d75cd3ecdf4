"""The server side of the replay: one engine replica serving requests in steps, as vLLM or SGLang schedules them.

rules.py names each rule and the source it follows; this module applies them. A step runs one batch and lasts what
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
from .rules import CLIP_MAX_NEW_TOKENS, CacheRules, SchedulerSettings
from .step_time import ServiceModel

__all__ = ["Engine", "Served", "make_engine"]


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
        self, ref, blocks: np.ndarray, prompt: int, output: int, max_new: int, arrival: float, seq: int
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

    def _form_step(self, now: float) -> Optional[float]:
        raise NotImplementedError


class VllmEngine(Engine):
    """vLLM 0.32's v1 scheduler (rules.VLLM_RULES): one budget of tokens a step, running requests first, then the
    waiting ones in FCFS order; blocks registered when scheduled; the newest running request preempted when a block
    is missing."""

    def _arrival_matters(self) -> bool:
        limit = self.settings.max_running
        # the new arrival is alone in the queue (a waiting head that did not fit still does not) and may run
        return len(self.waiting) == 1 and (limit is None or len(self.running) < limit)

    def _budget(self) -> float:
        return self.settings.batch_tokens or math.inf

    def _form_step(self, now: float) -> Optional[float]:
        if self._decode_run_possible():
            steps = self._steps_with_room(min(s.output - s.generated for s in self.running))
            if steps > 0:
                running = list(self.running)
                self._run = (steps, 0.0)
                self._apply = lambda t: self._end_run(running, t)
                return steps * self.service.step_seconds(0, len(running))
        budget = self._budget()
        scheduled: list[tuple[Served, int]] = []
        prefill = decodes = 0
        preempted_before = self.preempted
        index = 0
        while index < len(self.running) and budget > 0:
            served = self.running[index]
            count = int(min(served.tokens - served.computed, budget))
            decoding = served.computed == served.tokens - 1
            if not self._allocate(served, served.computed + count):
                break  # it was the last one: no one is left to make room for it
            scheduled.append((served, count))
            prefill, decodes = (prefill, decodes + 1) if decoding else (prefill + count, decodes)
            budget -= count
            index += 1
        if self.preempted == preempted_before:  # a step that preempted admits no one
            budget, admitted = self._admit_waiting(now, budget, scheduled)
            prefill += admitted
        if not scheduled:
            return None
        self._apply = lambda t: self._end_step(scheduled, t)
        return self.service.step_seconds(prefill, decodes)

    def _allocate(self, served: Served, upto: int) -> bool:
        """Slots for `served`'s sequence up to `upto` tokens, its full prompt blocks among them registered; the last
        running request preempted (again and again) while the cache has no room. False when `served` itself went.
        A request running alone goes on past the cache's end (the overflow counted, cache.overflowed): vLLM would
        have refused it, its prompt and max_tokens being longer than max_model_len, which its cache holds."""
        assert served.hold is not None
        need = self._blocks_for(upto) - served.hold.covered
        room = self.cache.room()
        while room is not None and need > room and self.running != [served]:
            victim = self.running.pop()
            self._requeue(victim, front=True)  # vLLM: preempted requests go back to the queue's head
            if victim is served:
                return False
            room = self.cache.room()
        self.cache.claim_to(served.hold, self._blocks_for(upto))
        self.cache.publish_to(served.hold, upto // self.block_size, share=False)
        served.computed = upto
        return True

    def _admit_waiting(self, now: float, budget: float, scheduled: list[tuple[Served, int]]) -> tuple[float, int]:
        """Waiting requests in FCFS order while the budget, the request limit and the cache allow; (the budget
        left, the prompt tokens they take this step)."""
        limit = self.settings.max_running
        capacity = self.cache.capacity
        taken = 0
        while self.waiting and budget > 0 and (limit is None or len(self.running) < limit):
            served = self.waiting[0]
            tokens = served.tokens
            hit, evictable_hits = self.cache.lookup(served.blocks, tokens)
            hit_tokens = hit * self.block_size
            if not self.settings.chunked_prefill and tokens - hit_tokens > budget:
                break
            count = int(min(tokens - hit_tokens, budget))
            if capacity is not None:
                upto = tokens if self.settings.reserve_full_prompt else hit_tokens + count
                # hit blocks that sit in the free queue are taken out of it: they count against the free blocks
                need = self._blocks_for(upto) - hit + evictable_hits
                watermark = int(self.settings.watermark * capacity) if (self.running or scheduled) else 0
                if need + watermark > (self.cache.room() or 0):
                    break
            self.waiting.popleft()
            got, served.hold = self.cache.admit(served.blocks, tokens)
            self._first_admission(served, got, now)
            self.cache.claim_to(served.hold, self._blocks_for(got + count))
            self.cache.publish_to(served.hold, (got + count) // self.block_size, share=False)
            served.computed = got + count
            self.running.append(served)
            scheduled.append((served, count))
            budget -= count
            taken += count
        return budget, taken

    def _end_step(self, scheduled: list[tuple[Served, int]], t: float) -> None:
        for served, _count in scheduled:
            if served.hold is None or served.computed < served.tokens:  # preempted meanwhile, or mid-prefill
                continue
            served.generated += 1
            if served.first_token_s is None:
                served.first_token_s = t
            if served.generated >= served.output:
                self.running.remove(served)
                self._leave(served, t)

    # --- decode runs

    def _decode_run_possible(self) -> bool:
        if not self.running or any(s.computed != s.tokens - 1 for s in self.running):
            return False
        if len(self.running) > self._budget():
            return False
        limit = self.settings.max_running
        if self.waiting and (limit is None or len(self.running) < limit):
            return not self._head_fits()
        return True

    def _head_fits(self) -> bool:
        """Whether the waiting head could be admitted now (it cannot later, while only decoding goes on: the room
        only shrinks)."""
        capacity = self.cache.capacity
        if capacity is None:
            return True
        served = self.waiting[0]
        tokens = served.tokens
        hit, evictable_hits = self.cache.lookup(served.blocks, tokens)
        count = int(min(tokens - hit * self.block_size, self._budget() - len(self.running)))
        if count <= 0:
            return False
        upto = tokens if self.settings.reserve_full_prompt else hit * self.block_size + count
        need = self._blocks_for(upto) - hit + evictable_hits
        watermark = int(self.settings.watermark * capacity)
        return need + watermark <= self._room()

    def _steps_with_room(self, steps: int) -> int:
        room = self.cache.room()
        if room is None:
            return steps
        computed = np.fromiter((s.computed for s in self.running), dtype=np.int64, count=len(self.running))
        covered = np.fromiter(
            (s.hold.covered if s.hold is not None else 0 for s in self.running), dtype=np.int64, count=len(self.running)
        )

        def need(k: int) -> int:
            return int(np.maximum(0, -(-(computed + k) // self.block_size) - covered).sum())

        if need(steps) <= room:
            return steps
        low, high = 0, steps  # need(low) <= room < need(high)
        while high - low > 1:
            middle = (low + high) // 2
            if need(middle) <= room:
                low = middle
            else:
                high = middle
        return low

    def _end_run(self, running: list[Served], t: float) -> None:
        steps = self._run[0] if self._run is not None else 0
        for served in running:  # the room was there for every step (_steps_with_room); taken now, nothing else ran
            assert served.hold is not None
            served.computed += steps
            served.generated += steps
            self.cache.claim_to(served.hold, self._blocks_for(served.computed))
        for served in running:
            if served.generated >= served.output:
                self.running.remove(served)
                self._leave(served, t)


class SglangEngine(Engine):
    """SGLang 0.5.23's scheduler (rules.SGLANG_RULES): a prefill batch or a decode batch a step, prefill first; the
    PrefillAdder's token budgets and its reservation of decode room; the radix tree filled as each prefill batch
    completes; retraction when a decode step does not fit."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        initial, floor, decay_steps = self.settings.new_token_ratio
        self._ratio_initial, self._ratio_floor = initial, floor
        self._ratio_decay = (initial - floor) / max(1, decay_steps)
        self.ratio = initial
        self.chunked: Optional[Served] = None
        self.batch_full = False  # no prefill is tried until a running request leaves

    def _has_pending(self) -> bool:
        return self.chunked is not None

    def _arrival_matters(self) -> bool:
        return not self.batch_full and self.chunked is None

    def _form_step(self, now: float) -> Optional[float]:
        if not self.running:
            self.batch_full = False  # an empty batch has no request left to leave
        if self.chunked is not None or (self.waiting and not self.batch_full):
            batch = self._form_prefill(now)
            if batch:
                tokens = sum(count for _, count in batch)
                self._apply = lambda t: self._end_prefill(batch, t)
                return self.service.step_seconds(tokens, 0)
        if not self.running:
            return None
        return self._form_decode(now)

    # --- prefill

    def _reserved(self, served: Served) -> float:
        return min(served.max_new - served.generated, CLIP_MAX_NEW_TOKENS) * self.ratio

    def _form_prefill(self, now: float) -> list[tuple[Served, int]]:
        settings, page = self.settings, self.block_size
        chunk_left = settings.batch_tokens if settings.batch_tokens is not None else math.inf
        input_left = settings.max_prefill_tokens if settings.max_prefill_tokens is not None else math.inf
        bounded = self.cache.capacity is not None
        offset = sum(self._reserved(s) for s in self.running) if bounded else 0.0
        batch: list[tuple[Served, int]] = []
        if self.chunked is not None:
            served = self.chunked
            left = served.tokens - served.computed
            room = self._room() - offset
            available = min(chunk_left, room) if room > 0 else chunk_left
            count = int(min(left, available))
            truncated = count < left
            offset += _ceil(count, page) + page + (0 if truncated else min(served.max_new, CLIP_MAX_NEW_TOKENS))
            chunk_left -= count
            input_left -= count
            batch.append((served, count))
            self.chunked = served if truncated else None
        limit = settings.max_running
        for served in self._in_policy_order():
            if bounded and (self._room() - offset) <= 0:
                self.batch_full = bool(batch) or bool(self.running)
                break
            if input_left <= 0 or chunk_left <= 0:
                break
            if limit is not None and len(self.running) + len(batch) >= limit:
                self.batch_full = True
                break
            tokens = served.tokens
            hit, evictable_hits = self.cache.lookup(served.blocks, tokens)
            extend = tokens - hit * page
            max_new = min(served.max_new - served.generated, CLIP_MAX_NEW_TOKENS)
            if bounded:
                # its matched prefix is pinned while it is weighed: not evictable for it
                room = self._room() - evictable_hits - offset
                # an engine with nothing else to do takes it (SGLang would have clipped its max_tokens to fit)
                if not extend + max_new + page < room and (batch or self.running or self.chunked is not None):
                    self.batch_full = bool(batch) or bool(self.running)
                    break
            count, reserve = extend, max_new
            if _ceil(extend, page) > chunk_left:
                count = int(chunk_left) // page * page
                end = (hit * page + count) // page * page
                count = end - hit * page
                if count <= 0:
                    break
                reserve = 0
            got, served.hold = self.cache.admit(served.blocks, tokens)
            self._first_admission(served, got, now)
            served.computed = got
            self.waiting.remove(served)
            offset += _ceil(count, page) + page + reserve
            chunk_left -= count
            input_left -= count
            batch.append((served, count))
            if count < extend:
                self.chunked = served
                break
        for served, count in batch:  # the batch's KV is allocated before it runs
            assert served.hold is not None
            self.cache.claim_to(served.hold, self._blocks_for(served.computed + count))
        return batch

    def _in_policy_order(self) -> list[Served]:
        queue = list(self.waiting)
        if self.settings.policy != "lpm" or len(queue) > 128:
            return queue
        # longest cached prefix first; one that shares 32+ tokens with an earlier waiting request goes last
        seen: list[np.ndarray] = []
        keyed = []
        for served in queue:
            hit, _ = self.cache.lookup(served.blocks, served.tokens)
            hit_tokens = hit * self.block_size
            deferred = False
            if hit_tokens <= 32:
                shared = max((_common(served.blocks, other) for other in seen), default=0) * self.block_size
                deferred = shared >= 32
                if not deferred:
                    seen.append(served.blocks)
            keyed.append((math.inf if deferred else -hit_tokens, served.seq, served))
        keyed.sort(key=lambda k: (k[0], k[1]))
        return [served for _, _, served in keyed]

    def _end_prefill(self, batch: list[tuple[Served, int]], t: float) -> None:
        for served, count in batch:
            assert served.hold is not None
            served.computed += count
            # into the radix tree as the batch completes (cache_unfinished_req), one copy of each page
            self.cache.publish_to(served.hold, served.computed // self.block_size, share=True)
            if served.computed < served.tokens:  # a chunk: it goes on in the next prefill batch
                continue
            served.generated += 1
            if served.first_token_s is None:
                served.first_token_s = t
            if served.generated >= served.output:
                self._leave(served, t)
                self.batch_full = False
            else:
                self.running.append(served)

    # --- decode

    def _form_decode(self, now: float) -> Optional[float]:
        if self._room() < len(self.running):
            self._retract()
        steps = min(s.output - s.generated for s in self.running)
        if self.chunked is None and (not self.waiting or self.batch_full):
            room = self.cache.room()
            if room is not None:  # every step takes a token's room for each running request
                steps = max(1, min(steps, room // max(1, len(self.running))))
        else:
            steps = 1
        running = list(self.running)
        self._run = (steps, 0.0) if steps > 1 else None
        self._apply = lambda t: self._end_decode(running, steps if self._run is None else self._run[0], t)
        return steps * self.service.step_seconds(0, len(running))

    def _retract(self) -> None:
        # keep the most generated, shortest prompts; retract from the other end until one token each fits
        order = sorted(self.running, key=lambda s: (s.generated, -s.prompt), reverse=True)
        while len(order) > 1 and self._room() < len(order):
            served = order.pop()
            self.running.remove(served)
            self._requeue(served, front=False)
        decoded = sum(s.generated for s in self.running)
        asked = sum(s.max_new for s in self.running)
        self.ratio = min(1.0, (decoded + 20 * len(self.running)) / (asked + 1))
        self.batch_full = False

    def _end_decode(self, running: list[Served], steps: int, t: float) -> None:
        self.ratio = max(self.ratio - self._ratio_decay * steps, self._ratio_floor)
        for served in running:  # the room was checked when the run began; nothing else took any since
            assert served.hold is not None
            served.computed = served.tokens + steps - 1
            served.generated += steps
            self.cache.claim_to(served.hold, self._blocks_for(served.computed))
        for served in running:
            if served.generated >= served.output:
                self.running.remove(served)
                self._leave(served, t)
                self.batch_full = False


def _ceil(tokens: float, page: int) -> float:
    return -(-tokens // page) * page


def _common(a: np.ndarray, b: np.ndarray) -> int:
    """Leading blocks two chains share."""
    n = min(len(a), len(b))
    if not n:
        return 0
    same = a[:n] == b[:n]
    return n if same.all() else int(np.argmin(same))


def make_engine(
    rules: CacheRules, settings: SchedulerSettings, cache: BlockCache, service: ServiceModel, **noise
) -> Engine:
    """An engine replica under `rules` (vLLM's or SGLang's scheduler); `noise`: Engine's noise, step_cv, wake_s."""
    kind = SglangEngine if rules.publish_after_prefill else VllmEngine
    return kind(rules, settings, cache, service, **noise)
