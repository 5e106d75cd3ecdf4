"""vLLM's scheduler as the replay's engine model applies it (rules.VLLM_RULES; the shared step: engine_base.py)."""

from __future__ import annotations

import math
from typing import Optional

import numpy as np

from .engine_base import Engine, Served

__all__ = ["VllmEngine"]


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
            if self._generated_one(served, t):
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
        self._end_decoding(running, self._run[0] if self._run is not None else 0, t)
