"""`fastgen export` (fastgen/cli/export.py) as a user types it, in a real process: a Mooncake export of one config
of a generated dataset, and the bad input the command refuses in one line, exit 2, before it writes anything (each
format's own output is tested in tests/export/)."""

from __future__ import annotations

import json

import pytest

from _support.cli import _one_error_line
from conftest import run_fastgen


def test_export_mooncake_writes_one_line_a_request_of_the_config_it_is_given(small_dataset, tmp_path):
    out = tmp_path / "c10.jsonl"
    args = ["export", "mooncake", str(small_dataset / "traces"), "--config", "scenario1/c10", "--out", str(out)]
    result = run_fastgen(*args)
    assert result.returncode == 0, result.stderr
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    sessions = {line["session_id"] for line in lines}
    assert result.stdout == f"wrote {len(lines)} requests of scenario1/c10 ({len(sessions)} sessions) to {out}\n"
    assert lines and all(line["hash_ids"] for line in lines)


def test_export_of_a_folder_with_many_configs_asks_for_one(small_dataset, tmp_path):
    out = tmp_path / "x.jsonl"
    result = run_fastgen("export", "mooncake", str(small_dataset / "traces"), "--out", str(out))
    assert result.returncode == 2
    line = _one_error_line(result)
    assert "configs or trace directories" in line and line.endswith(
        "pick one with --config NAME, or give one trace directory"
    )
    assert not out.exists()


def test_export_of_a_config_the_folder_does_not_hold_names_it(small_dataset, tmp_path):
    args = [
        "export",
        "mooncake",
        str(small_dataset / "traces"),
        "--config",
        "scenario9/c1",
        "--out",
        str(tmp_path / "x"),
    ]
    result = run_fastgen(*args)
    assert result.returncode == 2
    assert _one_error_line(result) == (
        f"fastgen: error: no config 'scenario9/c1' replays a trace directory of {small_dataset / 'traces'}"
    )


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["mooncake", "{missing}"], "{missing} is not a folder; give the trace folder fastgen wrote (e.g. traces)"),
        (["shards", "{missing}"], "fastgen export shards needs --shards N (how many load generators)"),
        (["mooncake", "{missing}", "--shards", "2"], "--shards is for `fastgen export shards CONFIG` and"),
        (["dag_jsonl", "{missing}", "--namespace", "x"], "--namespace is for fastgen export kubernetes, not dag_jsonl"),
        (
            ["mooncake", "{missing}", "--base-url", "http://h:1"],
            "--base-url is for fastgen export shards and kubernetes",
        ),
        (["bogus", "{missing}"], "argument format: invalid choice: 'bogus' (choose from 'mooncake', 'dag_jsonl',"),
    ],
    ids=["no-folder", "shards-without-n", "shards-elsewhere", "kubernetes-only", "base-url-elsewhere", "bad-format"],
)
def test_export_bad_input_is_one_line_exit_2_and_nothing_written(tmp_path, args, says):
    missing, out = tmp_path / "nowhere", tmp_path / "out"
    result = run_fastgen("export", *[a.format(missing=missing) for a in args], "--out", str(out))
    assert result.returncode == 2
    assert says.format(missing=missing) in _one_error_line(result)
    assert sorted(tmp_path.iterdir()) == []
