"""results/written.py: compare never overwrites a file it did not write, and --force keeps the user's."""

from __future__ import annotations

import pytest
from _support.results import report_of

from fastgen.results import compare_runs

# Writing: never over a file compare did not write


def test_compare_refuses_to_overwrite_a_report_it_did_not_write(two_sides, tmp_path):
    from fastgen.errors import OutputError

    out = tmp_path / "out"
    compare_runs(*two_sides, out, plots=False)
    compare_runs(*two_sides, out, plots=False)  # its own files: written again
    (out / "report.md").write_text((out / "report.md").read_text() + "\nmy notes\n")
    with pytest.raises(
        OutputError,
        match=r"report.md was not written by fastgen compare \(or was edited since\); "
        r"move it away, choose another --out, or pass --force",
    ):
        compare_runs(*two_sides, out, plots=False)
    assert (out / "report.md").read_text().endswith("my notes\n")


def test_compare_force_keeps_the_users_file_as_edited_and_writes_the_new_one(two_sides, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "report.json").write_text("mine")
    comparison = compare_runs(*two_sides, out, plots=False, force=True)
    assert comparison.moved == ["report.json.edited"] and (out / "report.json.edited").read_text() == "mine"
    assert report_of(out)["format"] == 4
    (out / "report.json").write_text("mine again")
    compare_runs(*two_sides, out, plots=False, force=True)
    assert (out / "report.json.edited-2").read_text() == "mine again"  # the first one kept too
