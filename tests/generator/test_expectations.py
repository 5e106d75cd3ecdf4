"""generator.expectations: what a written dataset must look like when read back, by the workload its manifest records."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from fastgen.bakeoff.plan import ConfigRun
from fastgen.bakeoff.runner import BakeoffOptions, _run_config_text
from fastgen.errors import SpecError
from fastgen.formats.manifest import MANIFEST_NAME, manifest_bytes
from fastgen.generator.expectations import check_replay_outputs, expected_shapes, recorded_spec
from fastgen.generator.scenarios import default_spec, in_spec
from fastgen.generator.workload import resolve_workload


def _dataset(folder: Path, workload: dict) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / MANIFEST_NAME).write_bytes(manifest_bytes(files=[], tokenizer={}, workload=workload, arguments={}))
    return folder


def test_expected_shapes_without_a_manifest_are_the_default_workloads(tmp_path):
    default_layouts = {layout for s in in_spec(default_spec()) for layout in s.layouts}
    assert set(expected_shapes(tmp_path)) == set(expected_shapes()) == default_layouts
    assert "agent_loop" not in default_layouts


def test_expected_shapes_follow_the_workload_the_manifest_records(tmp_path):
    agent = resolve_workload("agent")
    folder = _dataset(tmp_path / "traces", agent.to_dict())
    assert recorded_spec(folder) == agent
    assert "agent_loop" in expected_shapes(folder) and "scenario1" not in expected_shapes(folder)


def test_recorded_spec_of_a_workload_this_version_cannot_load_is_none(tmp_path):
    folder = _dataset(tmp_path / "traces", {"format": 1, "scenarios": {"scenario9": {}}})
    assert recorded_spec(folder) is None and recorded_spec(tmp_path / "elsewhere") is None
    assert set(expected_shapes(folder)) == set(expected_shapes())


def test_check_replay_outputs_refuses_recorded_outputs_for_a_workload_with_subagents(tmp_path):
    subagents = _dataset(tmp_path / "agent", resolve_workload("agent").to_dict())
    with pytest.raises(SpecError, match="--outputs recorded"):
        check_replay_outputs(subagents, "recorded")
    check_replay_outputs(subagents, "live")
    check_replay_outputs(_dataset(tmp_path / "default", default_spec().to_dict()), "recorded")
    check_replay_outputs(tmp_path / "no manifest", "recorded")  # traces without a manifest: taken as they are


def test_a_bakeoff_run_is_checked_against_its_datasets_workload(tmp_path):
    # what the command hands the bakeoff: the run's trace root and the outputs mode it replays in, after the
    # bakeoff's own choice (--outputs) is applied to the config
    _dataset(tmp_path / "traces", resolve_workload("agent").to_dict())
    config = tmp_path / "configs" / "agent_loop" / "c10.yml"
    config.parent.mkdir(parents=True)
    replay = {"trace_directory": "../../traces/agent_loop"}
    document = {"server": {}, "data": {"otel_trace_replay": replay}, "tokenizer": {}}
    config.write_text(yaml.safe_dump(document))
    server = SimpleNamespace(url="http://localhost:8000", engine=SimpleNamespace(name="vllm"))
    seen = []

    def check(trace_root: Path, outputs: str) -> None:
        seen.append((trace_root, outputs))
        check_replay_outputs(trace_root, outputs)

    run = ConfigRun("agent_loop/c10", config)
    options = BakeoffOptions(url=server.url, label="a", outputs="recorded", check_outputs=check)
    with pytest.raises(SpecError, match="sub-agent"):
        _run_config_text(run, server, tmp_path / "partial", options)
    options = BakeoffOptions(url=server.url, label="a", outputs="live", check_outputs=check)
    assert "agent_loop" in _run_config_text(run, server, tmp_path / "partial", options)
    assert seen == [(tmp_path / "traces", "recorded"), (tmp_path / "traces", "live")]


def test_the_public_bakeoff_checks_the_datasets_workload_as_the_command_does(tmp_path):
    import fastgen
    from fastgen.dataset_bakeoff import with_dataset_checks

    subagents = _dataset(tmp_path / "agent", resolve_workload("agent").to_dict())
    checked = with_dataset_checks(BakeoffOptions(url="http://localhost:8000", label="a"))
    with pytest.raises(SpecError, match="--outputs recorded"):
        checked.check_outputs(subagents, "recorded")
    own = BakeoffOptions(url="http://localhost:8000", label="a", check_outputs=lambda root, outputs: None)
    assert with_dataset_checks(own) is own  # a caller's own check is kept
    assert fastgen.run_bakeoff.__module__ == "fastgen.dataset_bakeoff"
