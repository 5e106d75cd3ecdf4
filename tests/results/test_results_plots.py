"""results/plots.py: the report's plots as PNGs, or none and the extra named."""

from __future__ import annotations

import sys

import pytest

from fastgen.results import compare_runs


def test_compare_runs_plots_are_pngs_when_matplotlib_is_installed(two_sides, tmp_path):
    pytest.importorskip("matplotlib")
    comparison = compare_runs(*two_sides, tmp_path / "out")
    assert comparison.plots and comparison.plots_skipped is None
    for name in comparison.plots.values():
        assert (tmp_path / "out" / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert f"]({comparison.plots['scenario1_hit_by_turn']})" in (tmp_path / "out" / "report.md").read_text()


def test_compare_runs_without_matplotlib_names_the_plots_extra_and_writes_the_tables(two_sides, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    comparison = compare_runs(*two_sides, tmp_path / "out")

    assert comparison.plots_skipped == "fastgen compare needs the plots extra: pip install 'fastgen[plots]'"
    assert not comparison.plots and not list((tmp_path / "out").glob("*.png"))
    assert f"Plots: none ({comparison.plots_skipped})." in (tmp_path / "out" / "report.md").read_text()
