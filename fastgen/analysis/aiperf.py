"""AIPerf's definition of a trace's cache hit rate (`aiperf analyze-trace`, aiperf 0.13.0,
dataset/synthesis/prefix_analyzer.py), so fastgen's numbers can be set beside it.

Per request, in file order: the length of the leading run of its hash ids seen in any earlier request (at any
position), over its number of ids; then the plain mean over requests with ids. An infinite cache, no session
structure, no token weighting; block size does not enter. statistics.mean, as AIPerf computes it, to the last bit.
"""

from __future__ import annotations

import statistics

__all__ = ["aiperf_cache_hit_rate", "dense_hash_ids"]


def dense_hash_ids(requests) -> list[list[int]]:
    """Each PlannedRequest's blocks (and partial tail) as dense ids in first-seen order: Mooncake's hash_ids."""
    dense: dict[int, int] = {}
    lists = []
    for request in requests:
        keys = request.blocks.tolist() + ([request.tail] if request.tail is not None else [])
        lists.append([dense.setdefault(key, len(dense)) for key in keys])
    return lists


def aiperf_cache_hit_rate(hash_id_lists: list[list[int]]) -> float:
    seen: set[int] = set()
    rates = []
    for ids in hash_id_lists:
        if not ids:
            continue
        k = 0
        while k < len(ids) and ids[k] in seen:
            k += 1
        rates.append(k / len(ids))
        seen.update(ids)
    return statistics.mean(rates) if rates else 0.0
