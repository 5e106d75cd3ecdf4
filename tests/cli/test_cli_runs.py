"""`fastgen compare` (fastgen/cli/runs.py), run as a real process: a report it did not write is refused in one line,
and --force keeps it beside the new one."""

from __future__ import annotations

import json


from _support.cli import _one_error_line
from conftest import run_fastgen


def test_compare_refuses_a_report_it_did_not_write_in_one_line_and_force_keeps_it(tmp_path):
    for side, cached in (("a", 900), ("b", 300)):
        folder = tmp_path / side / "scenario1" / "c2" / "repeat-1"
        folder.mkdir(parents=True)
        usage = {"prompt_tokens": 1000, "prompt_tokens_details": {"cached_tokens": cached}}
        (folder / "per_request_lifecycle_metrics.json").write_text(
            json.dumps(
                [
                    {
                        "start_time": float(i),
                        "end_time": i + 0.5,
                        "error": None,
                        "info": {
                            "labels": {"session": f"s{i}", "turn": "1", "turn_kind": "text"},
                            "response_metrics": {"server_usage": usage},
                        },
                        "computed_metrics": {"time_to_first_token": 0.1, "request_latency": 0.5, "output_tokens": 10},
                    }
                    for i in range(3)
                ]
            )
        )
    out = tmp_path / "report"
    out.mkdir()
    (out / "report.md").write_text("my edits\n")
    refused = run_fastgen("compare", str(tmp_path / "a"), str(tmp_path / "b"), "--out", str(out), "--no-plots")
    assert refused.returncode == 1 and _one_error_line(refused) == (
        f"fastgen: error: {out / 'report.md'} was not written by fastgen compare (or was edited since); move it "
        f"away, choose another --out, or pass --force to keep it as report.md.edited and write the new one"
    )
    assert (out / "report.md").read_text() == "my edits\n" and not (out / "report.json").exists()
    forced = run_fastgen(
        "compare", str(tmp_path / "a"), str(tmp_path / "b"), "--out", str(out), "--no-plots", "--force"
    )
    assert forced.returncode == 0, forced.stderr
    assert (out / "report.md.edited").read_text() == "my edits\n"
    assert "# Bakeoff report" in (out / "report.md").read_text()
    assert f"kept the file that was there as {out / 'report.md.edited'}" in forced.stderr
