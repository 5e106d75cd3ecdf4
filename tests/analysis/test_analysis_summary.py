"""analysis/summary.py: the answer first: the sweep's knee and the summary's cells."""

from __future__ import annotations

from _support.analysis import target_result


def test_knee_is_the_smallest_swept_capacity_within_one_point_of_unbounded():
    from fastgen.analysis import AnalysisOptions
    from fastgen.analysis.summary import knee, summary_cells

    reached = target_result("a", 1000, 800, sweep=[(100, 20.0), (200, 78.9), (400, 79.0), (800, 80.0)])
    never = target_result("b", 1000, 800, sweep=[(100, 20.0), (200, 78.0)])
    assert knee(reached) == 400 and knee(never) is None
    options = AnalysisOptions(sweep=True)
    assert summary_cells(reached, options) == ("400",)
    assert summary_cells(never, options) == ("beyond the sweep",)
