"""e2e/suites/bakeoff.py: the e2e bakeoff on two configs then compare (`make e2e` runs six), the engine log split at resets,
and its check of a hit against the predicted ceilings."""

from __future__ import annotations

import pytest

from e2e.suites.bakeoff import is_probe, run_fake_bakeoff, segments


@pytest.mark.slow  # fastgen bakeoff (inference-perf) against fake engines
def test_bakeoff_on_two_engines_then_compare_shows_what_the_engines_logged(tmp_path):
    failures = run_fake_bakeoff(tmp_path, ["scenario1/c10", "scenario3/c100_noisy"])
    assert failures == []
    report = (tmp_path / "report" / "report.md").read_text()
    assert "## Scenario 1" in report and "## Scenario 3" in report and "| scenario3/c100_noisy |" in report


def test_segments_split_the_engine_log_at_successful_resets():
    log = [
        {"t": 1, "body": {}},
        {"event": "reset", "done": True},
        {"t": 2},
        {"event": "reset", "done": False},
        {"t": 3},
        {"event": "reset", "done": True},
    ]
    assert segments(log) == [[{"t": 1, "body": {}}], [{"t": 2}, {"t": 3}], []]


def test_segments_leave_out_the_reset_probes_and_join_the_resets_of_one_verification():
    from fastgen.bakeoff.reset import PROBE_PROMPT

    probe = {"t": 0, "body": {"messages": [{"role": "user", "content": PROBE_PROMPT}]}}
    done = {"event": "reset", "done": True}
    log = [probe, probe, done, probe, done, {"t": 1}, probe, probe, done, probe, done, {"t": 2}]
    assert is_probe(probe) and not is_probe({"t": 1})
    assert segments(log) == [[], [{"t": 1}], [{"t": 2}]]


def test_the_e2e_ceiling_check_holds_a_hit_to_its_band_where_the_report_shows_one():
    """e2e.suites.bakeoff's check: within the tolerance of the point without a band, of the band with one (inference-perf's
    workers race turns released together: a run lands anywhere in the band, not on the point)."""
    from e2e.suites.bakeoff import _near_the_ceilings

    def table(hit_b: float, band: str | None) -> dict:
        columns = ["config", "hit % A", "hit % B", "ceiling % inf", "ceiling % cap"]
        row = ["scenario1/c10", {"value": 89.9}, {"value": hit_b}, 89.9, 81.6]
        if band is not None:
            columns.append("ceiling band % cap")
            row.append(band)
        return {"columns": columns, "rows": [row]}

    assert _near_the_ceilings(table(87.5, None)) == [
        "scenario1/c10: hit % B 87.5, analyze predicted 81.6 (ceiling % cap), more than 5.0 points from the point"
    ]
    assert _near_the_ceilings(table(87.5, "81.6-82.9")) == []
    assert _near_the_ceilings(table(75.0, "81.6-89.9")) == [
        "scenario1/c10: hit % B 75.0, analyze predicted 81.6 (ceiling % cap), more than 5.0 points from its band "
        "81.6-89.9"
    ]
