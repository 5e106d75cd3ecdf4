"""AIPerf's definition of a trace's cache hit rate (`aiperf analyze-trace`, aiperf 0.13.0,
dataset/synthesis/prefix_analyzer.py), so fastgen's numbers can be set beside it.

Per request, in file order: the length of the leading run of its hash ids seen in any earlier request (at any
position), over its number of ids; then the plain mean over requests with ids. An infinite cache, no session
structure, no token weighting; block size does not enter. The mean is statistics.mean's, as AIPerf computes it, to
the last bit.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

__all__ = ["AiperfRate", "aiperf_cache_hit_rate", "dense_hash_ids"]


def dense_hash_ids(requests) -> list[list[int]]:
    """Each PlannedRequest's blocks (and partial tail) as dense ids in first-seen order: Mooncake's hash_ids."""
    dense: dict[int, int] = {}
    lists = []
    for request in requests:
        keys = request.blocks.tolist() + ([request.tail] if request.tail is not None else [])
        lists.append([dense.setdefault(key, len(dense)) for key in keys])
    return lists


def aiperf_cache_hit_rate(hash_id_lists: list[list[int]]) -> float:
    rate = AiperfRate()
    for ids in hash_id_lists:
        rate.add(ids)
    return rate.value


class AiperfRate:
    """aiperf_cache_hit_rate request by request, without keeping the requests: the ids seen so far as flags over
    dense ids, and the rates' sum as an exact fraction (statistics.mean sums exactly, then rounds once)."""

    def __init__(self) -> None:
        self._seen = np.zeros(1024, dtype=bool)
        self._sum, self._count = Fraction(0), 0

    def add(self, ids) -> None:
        """One request's hash ids (non-negative dense ids), in order."""
        ids = np.asarray(ids, dtype=np.int64)
        if not len(ids):
            return
        if int(ids.max()) >= len(self._seen):
            self._seen = np.concatenate(
                [self._seen, np.zeros(max(int(ids.max()) + 1, 2 * len(self._seen)) - len(self._seen), dtype=bool)]
            )
        found = self._seen[ids]
        k = len(ids) if found.all() else int(np.argmin(found))
        self._sum += Fraction(k / len(ids))
        self._count += 1
        self._seen[ids] = True

    def forget(self, ids) -> None:
        """Ids no later request will carry (they will name other blocks)."""
        ids = np.asarray(ids, dtype=np.int64)
        self._seen[ids[ids < len(self._seen)]] = False

    @property
    def value(self) -> float:
        return float(self._sum / self._count) if self._count else 0.0
