"""fastgen.formats.config_dialect: the inference-perf config keys fastgen writes and the bakeoff reads back."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from fastgen.errors import SpecError
from fastgen.formats.config_dialect import (
    OUTPUTS_MODES,
    check_label,
    check_outputs_mode,
    replay_modes,
    replay_source,
    report_section,
)


def test_replay_modes_recorded_everything_gives_inference_perfs_keys():
    assert replay_modes("recorded", "recorded", "as_recorded") == {
        "disable_output_substitution": True,
        "override_tool_call_max_tokens": False,
        "tool_choice_mode": "as_recorded",
    }
    assert replay_modes("live", "floor")["tool_choice_mode"] == "force_recorded"  # forced by default


@pytest.mark.parametrize(
    "modes", [("echo", "floor", "forced"), ("live", "ceiling", "forced"), ("live", "floor", "auto")]
)
def test_replay_modes_unknown_mode_raises_naming_it(modes):
    unknown = next(
        m
        for m, known in zip(modes, (OUTPUTS_MODES, ("floor", "recorded"), ("forced", "as_recorded")))
        if m not in known
    )
    with pytest.raises(SpecError, match=repr(unknown)):
        replay_modes(*modes)


@pytest.mark.parametrize("label", ["vllm", "sglang-0.5_a100", "v1.2"])
def test_check_label_folder_name_is_returned(label):
    assert check_label(label) == label


@pytest.mark.parametrize("label", ["", ".hidden", "a/b", "two words", ".."])
def test_check_label_not_one_folder_name_raises(label):
    with pytest.raises(SpecError, match="is not a folder name"):
        check_label(label)


def _spec(*spawns: bool) -> SimpleNamespace:
    return SimpleNamespace(scenarios={f"s{i}": SimpleNamespace(spawns_subagents=s) for i, s in enumerate(spawns)})


def test_check_outputs_mode_recorded_with_subagents_raises_live_does_not():
    with pytest.raises(SpecError, match="--outputs live"):
        check_outputs_mode(_spec(False, True), "recorded")
    check_outputs_mode(_spec(False, True), "live")
    check_outputs_mode(_spec(False), "recorded")


def test_replay_source_dataset_is_the_json_loader_over_one_file_traces_the_directory():
    paths = {"traces": "../traces/scenario1", "dataset": "../traces/scenario1.jsonl"}
    assert replay_source("dataset", paths) == {"hf_dataset_path": {"path": "json", "data_files": paths["dataset"]}}
    assert replay_source("traces", paths) == {"trace_directory": paths["traces"]}


def test_report_section_asks_for_per_request_records_without_bodies():
    fields = report_section()["request_lifecycle"]["per_request_fields"]
    assert report_section()["request_lifecycle"]["per_request"] is True
    assert fields["info"] and fields["computed_metrics"] and not fields["request"] and not fields["response"]
