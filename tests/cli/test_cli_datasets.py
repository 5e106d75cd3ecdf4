"""`fastgen validate` (fastgen/cli/datasets.py) on a generated dataset, run as a real process: the total row, one
trace verbose, and a broken graph refused."""

from __future__ import annotations

import json
import re
import shutil


from conftest import run_fastgen, trace_files


def test_cli_validate_generated_dataset_exits_0_with_total_row(small_dataset):
    result = run_fastgen("validate", str(small_dataset / "traces"))

    assert result.returncode == 0, result.stdout + result.stderr
    total = [line.split() for line in result.stdout.splitlines() if line.startswith("total")]
    assert len(total) == 1, result.stdout
    files, ok, failed = int(total[0][1]), int(total[0][3]), int(total[0][4])
    assert files == len(trace_files(small_dataset / "traces")) and ok == files and failed == 0


def test_cli_validate_one_scenario1_trace_verbose_shows_six_events(small_dataset):
    trace = sorted((small_dataset / "traces" / "scenario1").glob("session_*.json"))[0]

    result = run_fastgen("validate", "--trace", str(trace), "--verbose")

    assert result.returncode == 0, result.stdout + result.stderr
    assert "events=6" in result.stdout
    assert len(re.findall(r"^event \d ", result.stdout, flags=re.M)) == 6
    assert "deviations: none" in result.stdout


def test_cli_validate_branch_without_root_output_exits_1(small_dataset, tmp_path):
    source = sorted((small_dataset / "traces" / "scenario2_sync").glob("session_*.json"))[0]
    folder = tmp_path / "scenario2_sync"
    folder.mkdir()
    shutil.copy(source, folder / "session_0000.json")
    doc = json.loads(source.read_bytes())
    # Without the root's answer in its input, inference-perf cannot feed the live output forward to the branch.
    root_text = json.loads(doc["spans"][0]["attributes"]["gen_ai.output.messages"])[0]["parts"][0]["content"]
    branch = doc["spans"][-1]["attributes"]
    messages = json.loads(branch["gen_ai.input.messages"])
    kept = [m for m in messages if not (m["role"] == "assistant" and m.get("content") == root_text)]
    assert len(kept) == len(messages) - 1
    branch["gen_ai.input.messages"] = json.dumps(kept)
    (folder / "session_0001.json").write_text(json.dumps(doc))

    result = run_fastgen("validate", str(tmp_path))

    assert result.returncode == 1, result.stdout + result.stderr
    total = [line.split() for line in result.stdout.splitlines() if line.startswith("total")]
    assert (int(total[0][3]), int(total[0][4])) == (1, 1), result.stdout
    assert "session_0001.json: event 5: segments shared(<-0) unique, expected" in result.stdout, result.stdout
