"""Compose texts of an exact number of tokens from pools of pre-tokenized units.

Why counts add up: every unit ends with a newline and starts with neither whitespace nor a newline. Under a
Llama-3/Qwen-style pre-tokenizer a newline is never merged into the next unit's first piece, so the tokens of a
joined text are the tokens of its units, and a text's count is the sum of its units' counts. That property is a
fact about the tokenizer, not an assumption: `Tokenizer.additive` probes it at load time, and when it fails every
joined text is counted by encoding it whole, so recorded counts stay exact either way.
"""

from __future__ import annotations

import bisect
import copy
from dataclasses import dataclass
from typing import Callable, TypeVar

import numpy as np

from ..streams import pool_rng
from ...formats.tokenizer import Tokenizer
from .kinds import FILLER_MAKERS, KINDS, UNIT_MAKERS
from .variation import Variation
from .vocab import Vocab

__all__ = ["Text", "Ends", "Composer", "Pool", "check_unit"]

_UNITS_PER_KIND = 600
# Prose is read sentence by sentence, and every answer of every session draws from its pool: a larger pool keeps
# sentences from recurring across sessions (measured as the distinct-sentence share, e2e/checks/realism.py)
_UNITS_OF_KIND = {"prose": 2400, "plan": 1200}
# Kinds whose units change their nouns and adjectives with every use (variation.py): prose is read sentence by
# sentence, and a few thousand paragraphs drawn by every session would otherwise repeat
_VARIED = ("prose", "plan")
_FILLERS_PER_KIND = 500
_TAIL_PLAN_LIMIT = 1024
_SMALL_DRAW = 64  # units drawn at once, up to which their running sum is taken in Python (measured faster)
_COUNT_MEMO = 4096  # remembered counts of short texts, per process
_MEMO_TEXT = 256  # characters: longer texts are counted every time
_DERIVED_MEMO = 4096  # remembered derivations of units (Composer.remembered), per process: more than a pool holds
_MISSING = object()
T = TypeVar("T")
_FILLER_CHOICE = 6  # distinct fillers a size needs to be used in tails


Ends = tuple[str, int, str, int]


@dataclass(frozen=True)
class Text:
    """A piece of text and its exact token count under the composer's tokenizer.

    `ends`: the first and the last part it was joined from and their tokens (text, tokens, text, tokens; a text of one
    part is both), where counts add up; None where they do not. Each end is a unit, so a prompt's template count can
    cut the text at them without tokenizing it (prompt_tokens).
    """

    text: str
    tokens: int
    ends: Ends | None = None


def check_unit(text: str) -> None:
    """Raise ValueError if a text breaks the rule that makes token counts additive."""
    if not text.endswith("\n") or text[:1].isspace() or not text:
        raise ValueError(f"unit must end with a newline and start with a non-space: {text[:40]!r}")


class Pool:
    """The units and fillers of one kind with their token counts, and what drawing from them needs. `parts` are
    the constructor's arguments: everything else is derived from them (a pool cache stores just those)."""

    def __init__(self, units: list[str], counts: list[int], fillers: list[str], filler_counts: list[int]):
        self._set_units(units, counts, fillers, list(filler_counts))
        by_count: dict[int, list[str]] = {}
        for text, c in zip(fillers, filler_counts):
            by_count.setdefault(c, []).append(text)
        # A size only a few fillers have would be said again and again in tails: keep the common sizes (and the
        # one- and two-token pieces, which every exact count may need)
        common = {c: texts for c, texts in by_count.items() if len(set(texts)) >= _FILLER_CHOICE or c <= 2}
        by_count = common or by_count
        self.fillers = {c: by_count[c] for c in sorted(by_count)}
        self.largest_filler = max(self.fillers)
        # For each r, the fewest fillers summing to exactly r, or to the least r' > r that some combination hits.
        plans = _tail_plans(sorted(by_count), _TAIL_PLAN_LIMIT)
        self.tail_plans = list(plans)
        for r in range(_TAIL_PLAN_LIMIT - 1, -1, -1):
            if self.tail_plans[r] is None:
                self.tail_plans[r] = self.tail_plans[r + 1]

    def with_units(self, units: list[str], counts: list[int]) -> Pool:
        """A pool of other units with this one's fillers (and what they make): a session's own sentences, say, whose
        tails are the fillers of their kind. The same as Pool(units, counts, *fillers), without working out again
        what the fillers make."""
        pool = copy.copy(self)
        pool._set_units(units, counts, self.parts[2], self.parts[3])
        return pool

    def _set_units(self, units: list[str], counts: list[int], fillers: list[str], filler_counts: list[int]) -> None:
        """The units and all that is derived from them alone (the fillers' part is the constructor's)."""
        self.units = units
        self.counts = np.asarray(counts, dtype=np.int64)
        self.count_list = list(counts)  # the same, for single lookups (a numpy scalar index is slow)
        self.parts = (units, self.count_list, fillers, filler_counts)
        self.mean = float(self.counts.mean())
        self.chars_per_token = sum(map(len, units)) / max(int(self.counts.sum()), 1)
        self.by_count = sorted(range(len(counts)), key=counts.__getitem__)  # unit indexes, fewest tokens first
        self.sorted_counts = [counts[i] for i in self.by_count]

    def draw_units(self, budget: int, rng: np.random.Generator) -> tuple[list[int], int]:
        """Random units, in one vectorized draw, whose counts add up to at most `budget`."""
        chosen: list[int] = []
        total = 0
        counts, n = self.count_list, len(self.units)
        while budget - total > 2 * self.mean:
            k = int((budget - total) / self.mean) + 8
            picks = rng.integers(n, size=k)
            if n > 1:  # the same unit twice in a row reads as a glitch: take its neighbour in the pool instead
                if chosen and picks[0] == chosen[-1]:
                    picks[0] = (picks[0] + 1) % n
                while len(repeats := np.flatnonzero(picks[1:] == picks[:-1]) + 1):
                    picks[repeats] = (picks[repeats] + 1) % n
            if k <= _SMALL_DRAW:  # the same prefix in plain Python: numpy's per-call cost outweighs a short loop
                left, m, drawn, listed = budget - total, 0, 0, picks.tolist()
                for i in listed:
                    if drawn + counts[i] > left:
                        break
                    drawn += counts[i]
                    m += 1
                chosen += listed[:m]
                total += drawn
            else:
                sums = np.cumsum(self.counts[picks])
                m = int(np.searchsorted(sums, budget - total, side="right"))
                chosen += picks[:m].tolist()
                total += int(sums[m - 1]) if m else 0
            if m < k:
                break
        # then single units drawn among those that still fit, so the tail of short fillers stays short
        while (fitting := bisect.bisect_right(self.sorted_counts, budget - total)) > 0:
            k = int(rng.integers(fitting))
            i = self.by_count[k]
            if chosen and i == chosen[-1] and fitting > 1:
                i = self.by_count[(k + 1) % fitting]
            chosen.append(i)
            total += counts[i]
        return chosen, total


def _tail_plans(sizes: list[int], limit: int) -> list[tuple[int, ...] | None]:
    """For each r up to limit, the fewest filler sizes that sum to exactly r (None where none do)."""
    plans: list[tuple[int, ...] | None] = [None] * (limit + 1)
    plans[0] = ()
    for r in range(1, limit + 1):
        for size in sizes:
            prev, best = plans[r - size] if size <= r else None, plans[r]
            if prev is not None and (best is None or len(prev) + 1 < len(best)):
                plans[r] = prev + (size,)
    return plans


class Composer:
    """Builds, per kind, a pool of seeded units once, and composes exact-size texts from it."""

    def __init__(self, tokenizer: Tokenizer, seed: int):
        self.tokenizer = tokenizer
        self.seed = seed
        self._pools: dict[str, Pool] = {}
        self._counts: dict[str, int] = {}
        self._derived: dict[tuple, object] = {}
        self._variations: dict[str, Variation | None] = {}

    def pool(self, kind: str) -> Pool:
        pool = self._pools.get(kind)
        if pool is None:
            pool = self._pools[kind] = self.make_pool(kind)
        return pool

    def make_pool(self, kind: str) -> Pool:
        """The pool of one kind, from its own RNG stream: independent of every other pool, so any process may
        build it (see adopt_pool)."""
        vocab = Vocab(pool_rng(self.seed, KINDS.index(kind)))
        units = [UNIT_MAKERS[kind](vocab) for _ in range(_UNITS_OF_KIND.get(kind, _UNITS_PER_KIND))]
        fillers = [FILLER_MAKERS[kind](vocab) for _ in range(_FILLERS_PER_KIND)]
        return Pool(units, self.tokenizer.count_many(units), fillers, self.tokenizer.count_many(fillers))

    def adopt_pool(self, kind: str, pool: Pool) -> None:
        self._pools[kind] = pool
        self._variations.pop(kind, None)

    def variation(self, kind: str) -> Variation | None:
        """The swappable words of the kind's pool (variation.py), where the kind varies and the tokenizer allows."""
        if kind not in self._variations:
            varies = kind in _VARIED and self.tokenizer.additive and self.tokenizer.counts_by_pre_tokens
            self._variations[kind] = Variation(self.pool(kind).units, self.tokenizer.count_many) if varies else None
        return self._variations[kind]

    def count(self, text: str) -> int:
        """tokenizer.count, remembered for the short texts that recur (tool names, headers, argument shapes).
        Bounded, so a worker's memory stays flat however many sessions it writes."""
        if len(text) > _MEMO_TEXT:
            return self.tokenizer.count(text)  # a patch's arguments, say: never seen twice, would only crowd it out
        tokens = self._counts.get(text)
        if tokens is None:
            if len(self._counts) >= _COUNT_MEMO:
                self._counts.clear()
            tokens = self._counts[text] = self.tokenizer.count(text)
        return tokens

    def remembered(self, key: tuple, make: Callable[[], T]) -> T:
        """make(), once per key: what is derived from a pool's units (their lines, counted), kept in this process.
        Bounded like count's memo."""
        value = self._derived.get(key, _MISSING)
        if value is _MISSING:
            if len(self._derived) >= _DERIVED_MEMO:
                self._derived.clear()
            value = self._derived[key] = make()
        return value  # type: ignore[return-value]

    def chars_for(self, tokens: int, kind: str) -> int:
        """About how many characters `tokens` tokens of `kind` text take (its pool's mean): to size a text whose
        exact count is taken once it is made, without counting every draft of it."""
        return int(tokens * self.pool(kind).chars_per_token)

    def line(self, text: str) -> Text:
        """A fixed text (a header, an instruction), counted by encoding it."""
        check_unit(text)
        return self._text(text, self.count(text))

    def _text(self, text: str, tokens: int) -> Text:
        """A text of one part."""
        return Text(text, tokens, (text, tokens, text, tokens) if self.tokenizer.additive else None)

    def join(self, parts: list[Text]) -> Text:
        text = "".join(p.text for p in parts)
        if not self.tokenizer.additive:
            return Text(text, self.tokenizer.count(text))
        parts = [p for p in parts if p.text]
        if len(parts) == 1:
            return parts[0]
        if not parts:
            return Text("", 0)
        first, last = parts[0].ends, parts[-1].ends
        ends = None if first is None or last is None else first[:2] + last[2:]
        return Text(text, sum(p.tokens for p in parts), ends)

    def fill(self, kind: str, n: int, rng: np.random.Generator) -> Text:
        """A text of `kind` with exactly n tokens (or the smallest possible text, if n is below that)."""
        return self.fill_from(self.pool(kind), n, rng, self.variation(kind))

    def fill_from(self, pool: Pool, n: int, rng: np.random.Generator, variation: Variation | None = None) -> Text:
        """A text of `pool`'s units and fillers with exactly n tokens (or the smallest possible text, if n is below
        that): fill, from a pool of the caller's (Pool.with_units). `variation`: the pool's swappable words, drawn
        afresh for each unit used."""
        chosen, total = pool.draw_units(n, rng)  # whole units while any fits, then short fillers of exact size
        if variation is None:
            pieces = [pool.units[i] for i in chosen]
        else:
            draws = rng.random(sum(variation.words(i) for i in chosen)).tolist()
            pieces, at = [], 0
            for i in chosen:
                pieces.append(variation.use(i, draws, at))
                at += variation.words(i)
        tail = self._fill_tail(pool, n - total, rng, pieces)
        total += sum(tail)
        text = "".join(pieces)
        if not self.tokenizer.additive:
            return Text(text, self.tokenizer.count(text))
        if len(pieces) <= 1:
            return self._text(text, total) if pieces else Text("", 0)
        first = pool.count_list[chosen[0]] if chosen else tail[0]
        last = tail[-1] if tail else pool.count_list[chosen[-1]]
        return Text(text, total, (pieces[0], first, pieces[-1], last))

    @staticmethod
    def _fill_tail(pool: Pool, r: int, rng: np.random.Generator, pieces: list[str]) -> list[int]:
        """Append fillers summing to exactly r tokens (or the least overshoot, if no combination hits r); return
        their counts."""
        largest = pool.largest_filler
        sizes: list[int] = []
        while r > _TAIL_PLAN_LIMIT:
            sizes.append(largest)
            r -= largest
        plan = pool.tail_plans[max(r, 0)]
        assert plan is not None, r  # Pool.__init__ gives each r the plan of the next r that has one
        sizes += plan
        used: set[str] = set()
        for size in sizes:  # a line said twice in a row reads as a glitch: each filler once, while the pool has others
            options = pool.fillers[size]
            fresh = [o for o in options if o not in used] or options
            piece = fresh[int(rng.integers(len(fresh)))]
            used.add(piece)
            pieces.append(piece)
        return sizes
