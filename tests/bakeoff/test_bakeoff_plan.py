"""bakeoff/plan.py: which configs a bakeoff runs, in which order, and the config each run really uses."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from fastgen.bakeoff.plan import run_config_text, select_configs
from fastgen.errors import OutputError


def test_select_configs_orders_by_scenario_and_load_and_takes_patterns(dataset):
    names = [c.name for c in select_configs(dataset / "configs")]
    assert names[:5] == ["scenario1/c1", "scenario1/c10", "scenario1/c25", "scenario1/c50", "scenario1/c100"]
    assert len(names) == 17
    picked = [c.name for c in select_configs(dataset / "configs", ["scenario3/*_noisy", "scenario2"])]
    assert picked == [
        "scenario2/c10_stagger",
        "scenario2/c10_sync",
        "scenario2/c25_stagger",
        "scenario2/c25_sync",
        "scenario2/c50_stagger",
        "scenario2/c50_sync",
        "scenario3/c100_noisy",
        "scenario3/c250_noisy",
        "scenario3/c500_noisy",
    ]
    with pytest.raises(OutputError, match="no config in .* matches 'scenario4'"):
        select_configs(dataset / "configs", ["scenario4"])


def test_run_config_loads_with_inference_perf_pointed_at_the_run(dataset, tmp_path):
    from inference_perf.config import read_config

    config = dataset / "configs" / "scenario1" / "c10.yml"
    text = run_config_text(
        config.read_text(),
        config_dir=config.parent,
        url="http://h:1",
        engine="sglang",
        report_dir=tmp_path / "run",
        outputs="recorded",
    )
    path = tmp_path / "run.yml"
    path.write_text(text)
    loaded = read_config(str(path))
    assert (loaded.server.base_url, loaded.server.type.value) == ("http://h:1", "sglang")
    assert loaded.storage.local_storage.path == (tmp_path / "run").as_posix()
    data_files = loaded.data.otel_trace_replay.hf_dataset_path["data_files"]
    assert Path(data_files) == (dataset / "traces" / "scenario1.jsonl").resolve()
    assert loaded.report.request_lifecycle.per_request is True
    assert os.path.isabs(loaded.tokenizer.pretrained_model_name_or_path)
    # --outputs recorded replays the trace's answers; the tool-call mode stays what the config said
    assert loaded.data.otel_trace_replay.disable_output_substitution is True
    assert loaded.data.otel_trace_replay.override_tool_call_max_tokens is True
