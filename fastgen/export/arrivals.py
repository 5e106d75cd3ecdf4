"""When sessions start, as a Poisson process over the config's window.

A config that starts sessions at a rate (scenario 3's `session_rate`: num_sessions over the arrival window) means
them to arrive as a Poisson process; inference-perf 0.7.0 spaces them evenly instead. Given that `count` sessions
arrive within the window count/rate, the arrival times of a Poisson process are `count` uniform draws over the window,
sorted (its order statistics conditioned on the count). Drawing them so, rather than summing exponential gaps, keeps
the window: the last session starts within it, and the mean gap is within 1/(count+1) of 1/rate whatever the seed,
while the gaps are still exponential (coefficient of variation 1).
"""

from __future__ import annotations

import random

__all__ = ["poisson_starts_ms"]


def poisson_starts_ms(count: int, rate: float, seed: str) -> list[float]:
    """`count` session starts in milliseconds, ascending, of a Poisson process of `rate` sessions a second over the
    window count/rate; the same seed gives the same starts (rounded to the microsecond, so the bytes do not hang on
    the last bit of a float)."""
    if count < 0 or not rate > 0:
        raise ValueError(f"a Poisson process needs count >= 0 and rate > 0, got {count} and {rate}")
    window_ms = count / rate * 1000.0
    draw = random.Random(seed)  # a string seed is hashed (sha512): the same on every platform and Python run
    return sorted(round(draw.uniform(0.0, window_ms), 3) for _ in range(count))
