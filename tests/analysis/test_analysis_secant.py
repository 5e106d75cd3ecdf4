"""analysis/secant.py: one coordinate moved until its equation's error is near 0, the others held, within bounds."""

from __future__ import annotations

import math

from fastgen.analysis.secant import secant


def errors(point: list[float]) -> list[float]:
    """Two equations: the first answers to x[0] (root at log 5), the second to x[1] only."""
    return [math.exp(point[0]) / 5.0 - 1.0, point[1] - 2.0]


def test_the_coordinate_reaches_its_root_and_the_others_stay():
    x = [0.0, 7.0]
    got, e = secant(x, errors(x), 0, (-5.0, 5.0), errors=errors, tolerance=0.02)
    assert abs(got[0] - math.log(5.0)) < 0.01
    assert got[1] == 7.0
    assert e == errors(got)
    assert x == [0.0, 7.0]  # the caller's point is not moved


def test_a_bound_holds_the_coordinate_and_the_best_point_seen_comes_back():
    x = [0.0, 2.0]
    got, e = secant(x, errors(x), 0, (-1.0, 1.0), errors=errors, tolerance=0.02)
    assert got[0] == 1.0  # the root, log 5, lies past the bound
    assert abs(e[0]) < abs(errors(x)[0])
