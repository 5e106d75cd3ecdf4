"""capacity_bakeoff.py and `fastgen bakeoff --capacity`: a step's config derived at its load (through ConfigDocument
only), the step folders' names, and the bad inputs refused in one line before any server is asked."""

from __future__ import annotations

import subprocess
import sys

import pytest
import yaml

from fastgen.bakeoff.plan import run_config_text
from fastgen.capacity_bakeoff import step_config
from fastgen.errors import SpecError
from fastgen.formats.config_document import ConfigDocument
from fastgen.formats.run_folder import capacity_folder, run_folders, step_label

CONFIG = {
    "load": {
        "type": "trace_session_replay",
        "num_workers": 4,
        "worker_max_concurrency": 600,
        "stages": [{"concurrent_sessions": 100, "num_sessions": 20, "session_rate": 2.0}],
    },
    "server": {"type": "vllm", "model_name": "m", "base_url": "http://127.0.0.1:9"},
    "tokenizer": {"pretrained_model_name_or_path": "tok"},
    "data": {"type": "otel_trace_replay", "otel_trace_replay": {"trace_directory": "../traces/scenario3_noisy"}},
}


def test_a_step_holds_its_load_in_flight_with_no_arrival_rate_and_the_workers_cap_scaled(tmp_path):
    text = run_config_text(
        yaml.safe_dump(CONFIG), config_dir=tmp_path, url="http://h:1", engine="vllm", report_dir=tmp_path, in_flight=7
    )
    document = ConfigDocument(yaml.safe_load(text))
    assert document.stage == {"concurrent_sessions": 7, "num_sessions": 20}
    assert document.load["worker_max_concurrency"] == 42  # 600 for 100 in flight: 6 a session, rounded up
    assert step_config(text) == (7, 20)
    # without a load the config is replayed as written
    same = run_config_text(
        yaml.safe_dump(CONFIG), config_dir=tmp_path, url="http://h:1", engine="vllm", report_dir=tmp_path
    )
    assert ConfigDocument(yaml.safe_load(same)).stage == CONFIG["load"]["stages"][0]


def test_a_config_without_a_concurrency_is_refused_with_the_fix():
    config = {**CONFIG, "load": {"stages": [{"session_rate": 2.0}]}}
    with pytest.raises(SpecError, match="sets no concurrent_sessions and num_sessions; give a config fastgen"):
        step_config(yaml.safe_dump(config))


def test_the_steps_are_named_by_load_outside_the_labels_own_runs(tmp_path):
    folder = capacity_folder(tmp_path, "vllm", "scenario3/c100_noisy")
    assert folder == tmp_path / "capacity" / "vllm" / "scenario3" / "c100_noisy"
    assert step_label(16) == "sessions-16"
    (tmp_path / "vllm").mkdir()
    assert run_folders(tmp_path / "vllm") == []  # a compare of OUT/vllm never meets the steps


def _bakeoff(tmp_path, *args: str, configs=None) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "fastgen", "bakeoff", "--url", "http://127.0.0.1:9", "--label", "x"]
    return subprocess.run(
        [*command, "--config-dir", str(configs or tmp_path), "--out", str(tmp_path / "out"), *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize(
    "args, said",
    [
        (["--capacity", "scenario3/c100"], "--capacity needs the SLO to meet: add --slo ttft_p95_ms=MS"),
        (["--slo", "ttft_p95_ms=100"], "--slo is for a capacity search; give --capacity CONFIG with it"),
        (["--capacity", "s/c1", "--slo", "ttft=1"], "--slo: 'ttft=1' is not NAME=VALUE"),
        (["--capacity", "s/c1", "--slo", "tpot_p95_ms=50"], "tpot_p95_ms is not measured by a capacity step yet"),
        (["--capacity", "s/c1", "--slo", "ttft_p95_ms=1", "--configs", "s/c2"], "searches one config"),
    ],
)
def test_bad_capacity_arguments_are_one_line_and_exit_non_zero(tmp_path, args, said):
    result = _bakeoff(tmp_path, *args)
    lines = result.stderr.strip().splitlines()
    assert result.returncode != 0 and len(lines) == 1 and said in lines[0], result.stderr
    assert not (tmp_path / "out").exists()


def test_a_highest_load_the_configs_sessions_cannot_hold_is_refused_before_the_server_is_asked(small_dataset, tmp_path):
    result = _bakeoff(
        tmp_path,
        "--capacity",
        "scenario3/c100_noisy",
        "--slo",
        "ttft_p95_ms=1000",
        "--highest",
        "100000",
        configs=small_dataset / "configs",
    )
    lines = result.stderr.strip().splitlines()
    assert result.returncode != 0 and len(lines) == 1, result.stderr
    assert "--highest 100000: scenario3/c100_noisy replays" in lines[0] and "larger --scale" in lines[0]
    assert not (tmp_path / "out").exists()
