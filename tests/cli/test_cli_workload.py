"""`fastgen workload` (fastgen/cli/workload.py) as a user types it, in a real process: show prints the workload as
YAML that loads and takes --scale, stats prints the table and writes its JSON, and the bad input each action refuses
in one line, exit 2, writing nothing (what stats measures: tests/traffic/; what fit fits: tests/fitting/)."""

from __future__ import annotations

import json

import pytest
import yaml

from _support.cli import _one_error_line
from conftest import run_fastgen


def test_workload_show_prints_yaml_that_loads_and_scales(tmp_path):
    default = run_fastgen("workload", "show")
    scaled = run_fastgen("workload", "show", "--scale", "0.1")
    assert default.returncode == 0 and scaled.returncode == 0, default.stderr + scaled.stderr
    full, small = yaml.safe_load(default.stdout), yaml.safe_load(scaled.stdout)
    assert list(full["scenarios"]) == list(small["scenarios"])
    for name in ("scenario1", "scenario3"):  # --scale 0.1: a tenth of the sessions
        assert small["scenarios"][name]["sessions"] * 10 == full["scenarios"][name]["sessions"]


def test_cli_workload_stats_prints_the_table_and_writes_json(small_dataset, tmp_path):
    out = tmp_path / "stats.json"
    result = run_fastgen("workload", "stats", str(small_dataset / "traces"), "--json", str(out))
    assert result.returncode == 0, result.stderr
    assert "| input tokens per step, mean | 154,000 (TraceLab) |" in result.stdout
    measured = json.loads(out.read_text())
    assert measured["sessions"] == len(list((small_dataset / "traces").glob("*/session_*.json")))
    bad = run_fastgen("workload", "stats", str(tmp_path / "missing"))
    assert bad.returncode == 1 and bad.stderr.strip().endswith("does not exist")


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["stats"], "fastgen workload stats needs trace folders or files (e.g. traces/)"),
        (["show", "--json", "{tmp}/x.json"], "TRACES, --against, --json, --out and --tokenizer are for `fastgen workload"),
        (["fit", "{tmp}"], "fastgen workload fit needs trace folders or files and --out FILE (e.g. traces/ --out my.yaml)"),
        (["fit", "{tmp}", "--out", "{tmp}/no/x.yaml"], "--out {tmp}/no/x.yaml: folder {tmp}/no does not exist; create it"),
        (["fit", "{tmp}", "--out", "{tmp}/x.yaml", "--against", "{tmp}"], "--against is for `fastgen workload stats`"),
        (["fit", "{tmp}", "--out", "{tmp}/x.yaml", "--scale", "0.5"], "fastgen workload fit takes its workload from the"),
        (["stats", "{tmp}", "--block-size", "0"], "--block-size"),
    ],
    ids=["stats-without-traces", "show-with-json", "fit-without-out", "fit-out-folder-missing", "fit-against",
         "fit-shaped", "bad-block-size"],
)  # fmt: skip
def test_workload_bad_input_is_one_line_exit_2_and_nothing_written(tmp_path, args, says):
    result = run_fastgen("workload", *[a.format(tmp=tmp_path) for a in args])
    assert result.returncode == 2
    assert says.format(tmp=tmp_path) in _one_error_line(result)
    assert sorted(tmp_path.iterdir()) == []
