"""results/report.py: the pair of sides a report compares, its figures pooled over the repeats every config has."""

from __future__ import annotations

import pytest
from _support.results import scenario1_requests, write_repeat

from fastgen.results import read_runs
from fastgen.results.report import Pair, Side
from fastgen.results.stats import hit_percent, hit_ratio


def test_pooled_figures_take_only_the_repeats_every_config_has(tmp_path):
    # c2 ran twice and c4 once, each side alike: pooled over both, repeat 2 (c2 alone) must not tilt the median
    for side in ("a", "b"):
        write_repeat(tmp_path / side / "scenario1" / "c2", scenario1_requests(900), repeat=1, repeats=2)
        write_repeat(tmp_path / side / "scenario1" / "c2", scenario1_requests(900), repeat=2, repeats=2)
        write_repeat(tmp_path / side / "scenario1" / "c4", scenario1_requests(0), repeat=1, repeats=1, concurrency=4)
    runs = read_runs(tmp_path / "a")[0]
    pair = Pair(Side("a", runs), Side("b", read_runs(tmp_path / "b")[0]))
    a, b, _ = pair.triple(hit_ratio(), ["scenario1/c2", "scenario1/c4"])
    assert a.repeats == 1 and a.value == pytest.approx(
        hit_percent(runs["scenario1/c2"].repeats[0].requests + runs["scenario1/c4"].repeats[0].requests)
    )
