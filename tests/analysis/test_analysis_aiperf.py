"""analysis/aiperf.py: AIPerf's definition of a trace's cache hit rate."""

from __future__ import annotations

import random

from fastgen.analysis.aiperf import aiperf_cache_hit_rate


def test_aiperf_rate_is_statistics_mean_of_the_leading_run_to_the_last_bit():
    import statistics

    rng = random.Random(3)
    for _ in range(200):
        lists = [[rng.randrange(30) for _ in range(rng.randrange(0, 10))] for _ in range(rng.randrange(0, 40))]
        seen, rates = set(), []
        for ids in lists:
            if ids:
                k = 0
                while k < len(ids) and ids[k] in seen:
                    k += 1
                rates.append(k / len(ids))
                seen.update(ids)
        assert aiperf_cache_hit_rate(lists) == (statistics.mean(rates) if rates else 0.0)
