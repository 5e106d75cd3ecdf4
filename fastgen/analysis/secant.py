"""The one-speed solver calibrate.py fits the service model with: the secant method on one coordinate of a point,
against the error of the sum that coordinate moves most, the others held (one Gauss-Seidel step)."""

from __future__ import annotations

__all__ = ["secant"]

_STEPS = 6
_STEP = 0.3  # the secant method's first step, in log speed
_MOST_STEP = 2.0  # at most a factor e^2 a step


def secant(
    x: list[float], e: list[float], coordinate: int, bounds: tuple[float, float], *, errors, tolerance: float
) -> tuple[list[float], list[float]]:
    """Move x[coordinate] within `bounds` until errors(x)[coordinate] is within `tolerance` / 2 of 0 (secant steps
    from a first step of _STEP, each at most _MOST_STEP, _STEPS of them at most); the best point seen and its
    errors."""
    equation = coordinate
    best = (abs(e[equation]), x, e)
    previous_x, previous_e = x[coordinate], e[equation]
    current = list(x)
    current[coordinate] += _STEP if e[equation] > 0 else -_STEP  # a slower speed lengthens its sum
    for _ in range(_STEPS):
        got = errors(current)
        if abs(got[equation]) < best[0]:
            best = (abs(got[equation]), list(current), got)
        if abs(got[equation]) < tolerance / 2:
            break
        slope = (got[equation] - previous_e) / (current[coordinate] - previous_x)
        previous_x, previous_e = current[coordinate], got[equation]
        if abs(slope) < 1e-6:  # the sum does not move with this speed here
            break
        move = max(-_MOST_STEP, min(_MOST_STEP, -got[equation] / slope))
        current = list(current)
        current[coordinate] = max(bounds[0], min(bounds[1], current[coordinate] + move))
        if current[coordinate] == previous_x:  # pinned at a bound
            break
    return best[1], best[2]
