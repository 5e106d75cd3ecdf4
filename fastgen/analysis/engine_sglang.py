"""SGLang's scheduler as the replay's engine model applies it (rules.SGLANG_RULES; the shared step:
engine_base.py)."""

from __future__ import annotations

import math
from typing import Optional

import numpy as np

from .engine_base import Engine, Served
from .rules import CLIP_MAX_NEW_TOKENS

__all__ = ["SglangEngine"]


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
            served, count, offset = self._next_chunk(chunk_left, offset)
            chunk_left -= count
            input_left -= count
            batch.append((served, count))
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

    def _next_chunk(self, chunk_left: float, offset: float) -> tuple[Served, int, float]:
        """The chunked request's next chunk, first in the batch: (the request, its tokens, the offset with what it
        reserves); the request stays the chunked one while its prompt is not done."""
        served, page = self.chunked, self.block_size
        assert served is not None
        left = served.tokens - served.computed
        room = self._room() - offset
        available = min(chunk_left, room) if room > 0 else chunk_left
        count = int(min(left, available))
        truncated = count < left
        offset += _ceil(count, page) + page + (0 if truncated else min(served.max_new, CLIP_MAX_NEW_TOKENS))
        self.chunked = served if truncated else None
        return served, count, offset

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
            if self._generated_one(served, t):
                self._leave(served, t)
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
        self._end_decoding(running, steps, t)

    def _leave(self, served: Served, t: float) -> None:
        super()._leave(served, t)
        self.batch_full = False  # a request that leaves makes room: prefill is tried again


def _ceil(tokens: float, page: int) -> float:
    return -(-tokens // page) * page


def _common(a: np.ndarray, b: np.ndarray) -> int:
    """Leading blocks two chains share."""
    n = min(len(a), len(b))
    if not n:
        return 0
    same = a[:n] == b[:n]
    return n if same.all() else int(np.argmin(same))
