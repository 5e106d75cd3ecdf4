"""analysis/plots.py: an analysis as charts, the capacity marked."""

from __future__ import annotations

import pytest
from _support.analysis import target_result


def test_analysis_plots_mark_the_capacity_and_draw_by_turn_at_it():
    pytest.importorskip("matplotlib")
    import matplotlib.pyplot as plt

    from fastgen.analysis.plots import analysis_plots
    from fastgen.results.plots import draw_plot

    sweep = [(12_000, 30.0), (60_000, 55.0), (300_000, 70.0), (1_500_000, 80.0), (7_500_000, 80.0)]
    results = [
        target_result("scenario3/c500_noisy", 1000, 800, 300, sweep, {"1": [500, 300, 100], "2": [500, 500, 200]})
    ]
    plots = {p.name: p for p in analysis_plots(results, {"scenario3/c500_noisy": sweep}, capacity_tokens=420_000)}
    assert sorted(plots) == [
        "scenario3_hit_by_capacity",
        "scenario3_hit_by_turn",
        "scenario3_hit_by_turn_at_capacity",
        "stable_vs_noisy",
    ]
    assert plots["scenario3_hit_by_turn"].series == {"scenario3/c500_noisy": [60.0, 100.0]}
    assert plots["scenario3_hit_by_turn_at_capacity"].series == {"scenario3/c500_noisy": [20.0, 40.0]}
    capacity = plots["scenario3_hit_by_capacity"]
    assert capacity.marks == {"KV capacity asked for: 420,000 tokens": 420_000} and capacity.x_tokens
    figure = draw_plot(capacity)
    try:
        figure.canvas.draw()
        (axes,) = figure.axes
        (mark,) = [line for line in axes.get_lines() if line.get_label() == "KV capacity asked for: 420,000 tokens"]
        assert list(mark.get_xdata()) == [420_000, 420_000]
        assert "KV capacity asked for: 420,000 tokens" in [t.get_text() for t in axes.get_legend().get_texts()]
        low, high = axes.get_xlim()
        shown = [t for t in axes.get_xticklabels() if t.get_text() and low <= t.get_position()[0] <= high]
        assert [t.get_text() for t in shown] == ["20K", "50K", "100K", "200K", "500K", "1M", "2M", "5M"]
        boxes = [t.get_window_extent() for t in shown]
        assert not any(a.overlaps(b) for a, b in zip(boxes, boxes[1:]))  # legible: no label touches the next
    finally:
        plt.close(figure)
    unbounded_only = analysis_plots(results, {"scenario3/c500_noisy": sweep})
    assert [p.marks for p in unbounded_only if p.name == "scenario3_hit_by_capacity"] == [{}]
    assert "scenario3_hit_by_turn_at_capacity" not in [p.name for p in unbounded_only]
