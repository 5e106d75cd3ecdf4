"""fastgen.validate against the real inference-perf 0.7.0 graph builder, on tiny hand-written traces."""

from __future__ import annotations

import importlib
import json
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
import zstandard

from fastgen.errors import MissingExtraError, ValidationError
from fastgen.generator.expectations import expected_shapes
from fastgen.validate import FileReport, check_file_against, describe_file, summary_table, validate_tree_against

SHAPES = expected_shapes()  # the default workload's: what a folder without a manifest is held to
T0 = datetime(2026, 6, 15, 10, 0, 0, tzinfo=timezone.utc)
TOOLS = [
    {
        "type": "function",
        "name": "apply_patch",
        "description": "Apply a unified diff to the workspace.",
        "parameters": {"type": "object", "properties": {"patch": {"type": "string"}}, "required": ["patch"]},
    }
]


@pytest.fixture(scope="module", autouse=True)
def graph_api():
    """Import inference-perf once for the module (it takes seconds); every test below uses the real thing."""
    return importlib.import_module("inference_perf.datagen.replay.otel_trace_to_replay_graph")


# --- trace writers ------------------------------------------------------------------------------------------------


def _iso(seconds: float) -> str:
    return (T0 + timedelta(seconds=seconds)).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _span(session: str, scenario: str, turn: int, messages: list, output, start: float, end: float, *, tools=True):
    """One chat span; `output` is the assistant text, or {"id", "arguments"} for an apply_patch tool call."""
    if isinstance(output, dict):
        part = {"type": "tool_call", "id": output["id"], "name": "apply_patch", "arguments": output["arguments"]}
        reasons = ["tool_calls"]
    else:
        part = {"type": "text", "content": output}
        reasons = ["stop"]
    attributes = {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": "tiny-model",
        "gen_ai.conversation.id": session,
        "gen_ai.input.messages": json.dumps(messages),
        "gen_ai.output.messages": json.dumps([{"role": "assistant", "parts": [part]}]),
        "gen_ai.usage.input_tokens": 40 + 10 * len(messages),
        "gen_ai.usage.output_tokens": 12,
        "gen_ai.response.finish_reasons": reasons,
        "fastgen.scenario": scenario,
        "fastgen.turn": turn,
    }
    if tools:
        attributes["gen_ai.tool.definitions"] = json.dumps(TOOLS)
    return {
        "span_id": f"{session}-t{turn}",
        "trace_id": session,
        "name": "chat tiny-model",
        "start_time": _iso(start),
        "end_time": _iso(end),
        "status": {"code": 1},
        "attributes": attributes,
    }


def _chain(session: str, scenario: str, turns: int, tool_turns=(), *, orphan=False, tools=True) -> dict:
    """A linear conversation; a tool-call turn reappears as assistant tool_calls + role:tool, or (orphan=True) the
    original generator's way: placeholder text plus a role:tool message whose id matches no tool_calls."""
    history = [
        {"role": "system", "content": f"You are a coding agent working on {session}."},
        {"role": "user", "content": f"Fix the failing test in {session}."},
    ]
    spans = []
    for turn in range(1, turns + 1):
        call_id = f"call_{session}_{turn}"
        patch = {"patch": f"--- a/mod{turn}.py\n+++ b/mod{turn}.py"}
        output = {"id": call_id, "arguments": patch} if turn in tool_turns else f"Step {turn} analysis for {session}."
        start = 3.0 * (turn - 1)
        spans.append(_span(session, scenario, turn, list(history), output, start, start + 2.0, tools=tools))
        if isinstance(output, str):
            history += [{"role": "assistant", "content": output}, {"role": "user", "content": f"Go on ({turn})."}]
            continue
        if orphan:
            history.append({"role": "assistant", "content": f"tool_call: apply_patch({json.dumps(patch)})"})
        else:
            # Compact arguments differ from the output's text form, so the edge must come from the ids.
            function = {"name": "apply_patch", "arguments": json.dumps(patch, separators=(",", ":"))}
            history.append(
                {"role": "assistant", "tool_calls": [{"id": call_id, "type": "function", "function": function}]}
            )
        history.append({"role": "tool", "tool_call_id": call_id, "content": f"patch {turn} applied"})
    return {"session_id": session, "spans": spans}


def _fan(session: str, scenario: str, branch_times: list[tuple[float, float]]) -> dict:
    """A root (0..2 s) and one branch per (start, end), each continuing the root's conversation."""
    base = [
        {"role": "system", "content": f"You are a coding agent working on {session}."},
        {"role": "user", "content": f"Plan the refactor of {session}."},
    ]
    plan = f"Plan for {session}: split the work into five parts."
    spans = [_span(session, scenario, 1, base, plan, 0.0, 2.0)]
    for k, (start, end) in enumerate(branch_times, start=2):
        messages = base + [{"role": "assistant", "content": plan}, {"role": "user", "content": f"Do part {k - 1}."}]
        spans.append(_span(session, scenario, k, messages, f"Part {k - 1} of {session} is done.", start, end))
    return {"session_id": session, "spans": spans}


SYNC = [(3.0, 6.0 + k) for k in range(5)]  # all branches start together
STAGGER_OVERLAPPING = [(3.0 + 0.5 * k, 6.0 + k) for k in range(5)]  # each starts before any sibling ends
STAGGER_SERIALIZED = [
    (3.0, 4.0),
    (3.2, 9.0),
    (3.4, 9.0),
    (3.6, 9.0),
    (5.0, 9.0),
]  # the last starts after the first ended


def _write(folder: Path, index: int, doc: dict) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"session_{index:04d}.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


def _dataset(root: Path) -> Path:
    """A valid five-folder dataset, one file each (two for scenario1), plus entries the validator must ignore."""
    _write(root / "scenario1", 0, _chain("scenario1-0000", "scenario1", 6, (3, 5)))
    _write(root / "scenario1", 1, _chain("scenario1-0001", "scenario1", 6, (3, 5)))
    _write(root / "scenario2_sync", 0, _fan("scenario2_sync-0000", "scenario2_sync", SYNC))
    _write(root / "scenario2_stagger", 0, _fan("scenario2_stagger-0000", "scenario2_stagger", STAGGER_OVERLAPPING))
    _write(root / "scenario3_stable", 0, _chain("scenario3_stable-0000", "scenario3_stable", 3, (2,)))
    _write(root / "scenario3_noisy", 0, _chain("scenario3_noisy-0000", "scenario3_noisy", 2))
    (root / "tokenizer").mkdir()
    (root / "tokenizer" / "session_9999.json").write_text("not a trace")
    (root / "manifest.json").write_text("{}")
    return root


# --- check_file_against -------------------------------------------------------------------------------------------


def test_check_file_scenario1_tool_loop_chain_passes(tmp_path):
    path = _write(tmp_path / "scenario1", 0, _chain("scenario1-0000", "scenario1", 6, (3, 5)))
    report = check_file_against(path, SHAPES)
    assert report == FileReport(str(path), "scenario1", 6, ())


def test_check_file_scenario1_orphan_tool_message_reports_temporal_edge(tmp_path):
    # original-flaws.md item 2: the tool call comes back as text, so turn 4 hangs off turn 2 plus a timing-only edge.
    path = _write(tmp_path / "scenario1", 0, _chain("scenario1-0000", "scenario1", 6, (3, 5), orphan=True))
    deviations = check_file_against(path, SHAPES).deviations
    assert "event 3: predecessors event 1 full_match, event 2 temporal, expected event 2 (causal)" in deviations
    assert any(d.startswith("event 3: segments shared(<-2) unique,") for d in deviations)
    assert any(d.startswith("event 5: predecessors") and "temporal" in d for d in deviations)


def test_check_file_scenario1_tool_call_on_wrong_turn_reported(tmp_path):
    path = _write(tmp_path / "scenario1", 0, _chain("scenario1-0000", "scenario1", 6, (2, 5)))
    deviations = check_file_against(path, SHAPES).deviations
    assert "event 1: expected_output_is_tool_call True, expected False" in deviations
    assert "event 2: expected_output_is_tool_call False, expected True" in deviations


@pytest.mark.parametrize(("scenario", "times"), [("scenario2_sync", SYNC), ("scenario2_stagger", STAGGER_OVERLAPPING)])
def test_check_file_scenario2_overlapping_branches_pass(tmp_path, scenario, times):
    path = _write(tmp_path / scenario, 0, _fan(f"{scenario}-0000", scenario, times))
    assert check_file_against(path, SHAPES) == FileReport(str(path), scenario, 6, ())


def test_check_file_scenario2_branch_after_sibling_ended_reports_temporal_edge(tmp_path):
    # original-flaws.md item 3: the temporal fallback serializes the late branch behind the sibling that ended.
    path = _write(
        tmp_path / "scenario2_stagger", 0, _fan("scenario2_stagger-0000", "scenario2_stagger", STAGGER_SERIALIZED)
    )
    deviations = check_file_against(path, SHAPES).deviations
    assert "event 5: predecessors event 0 full_match, event 1 temporal, expected event 0 (causal)" in deviations
    assert "event 5: segments shared(<-1) unique, expected shared(<-0) output(<-0) unique" in deviations
    assert not any(d.startswith(("event 2", "event 3", "event 4")) for d in deviations)


@pytest.mark.parametrize(
    ("scenario", "turns", "tool_turns"), [("scenario3_stable", 2, ()), ("scenario3_noisy", 6, (2, 4))]
)
def test_check_file_scenario3_chain_passes(tmp_path, scenario, turns, tool_turns):
    path = _write(tmp_path / scenario, 0, _chain(f"{scenario}-0000", scenario, turns, tool_turns))
    assert check_file_against(path, SHAPES) == FileReport(str(path), scenario, turns, ())


@pytest.mark.parametrize(("scenario", "turns", "expected"), [("scenario1", 5, "6"), ("scenario3_stable", 7, "2 to 6")])
def test_check_file_wrong_event_count_reported(tmp_path, scenario, turns, expected):
    path = _write(tmp_path / scenario, 0, _chain(f"{scenario}-0000", scenario, turns, (3,)))
    report = check_file_against(path, SHAPES)
    assert report.events == turns
    assert f"{turns} events, expected {expected}" in report.deviations


def test_check_file_tool_call_without_definitions_reported(tmp_path):
    # Without gen_ai.tool.definitions inference-perf replays the tool-call turn as text, and says so in a warning.
    path = _write(tmp_path / "scenario3_stable", 0, _chain("s3-0000", "scenario3_stable", 3, (2,), tools=False))
    deviations = check_file_against(path, SHAPES).deviations
    assert "event 1: expected_output_is_tool_call False, expected True" in deviations
    assert any(
        d.startswith("inference-perf warned: Span s3-0000-t2: recorded output is a tool call") for d in deviations
    )


def test_check_file_zst_with_two_frames_reads_every_frame(tmp_path):
    data = json.dumps(_chain("scenario1-0000", "scenario1", 6, (3, 5))).encode()
    half = len(data) // 2
    compressor = zstandard.ZstdCompressor()
    path = tmp_path / "scenario1" / "session_0000.json.zst"
    path.parent.mkdir()
    path.write_bytes(compressor.compress(data[:half]) + compressor.compress(data[half:]))
    assert check_file_against(path, SHAPES) == FileReport(str(path), "scenario1", 6, ())


def test_check_file_scenario_attribute_missing_falls_back_to_folder(tmp_path):
    doc = _fan("s-0000", "scenario2_sync", SYNC)
    for span in doc["spans"]:
        del span["attributes"]["fastgen.scenario"]
    report = check_file_against(_write(tmp_path / "scenario2_sync", 0, doc), SHAPES)
    assert (report.scenario, report.deviations) == ("scenario2_sync", ())


def test_check_file_unknown_scenario_reported(tmp_path):
    report = check_file_against(_write(tmp_path / "elsewhere", 0, _chain("x-0000", "scenario9", 2)), SHAPES)
    assert report.deviations[0].startswith("unknown scenario 'scenario9'")


@pytest.mark.parametrize("content", ["{not json", '{"session_id": "x"}', "[]"])
def test_check_file_unreadable_reported_not_raised(tmp_path, content):
    path = tmp_path / "scenario1" / "session_0000.json"
    path.parent.mkdir()
    path.write_text(content)
    report = check_file_against(path, SHAPES)
    assert (report.events, len(report.deviations)) == (0, 1)
    assert report.deviations[0].startswith("unreadable: ")


def test_check_file_inference_perf_missing_raises_missing_extra_not_a_deviation(tmp_path, monkeypatch):
    path = _write(tmp_path / "scenario1", 0, _chain("scenario1-0000", "scenario1", 6, (3, 5)))
    monkeypatch.setitem(sys.modules, "inference_perf.datagen.replay.otel_trace_to_replay_graph", None)
    with pytest.raises(
        MissingExtraError,
        match=r"^reading traces as inference-perf does needs the validate extra: "
        r"pip install 'fastgen\[validate\]' \(Python 3\.12\)$",
    ):
        check_file_against(path, SHAPES)


def test_validate_tree_inference_perf_missing_raises_before_reading_any_file(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "inference_perf", None)
    with pytest.raises(MissingExtraError, match=r"^fastgen validate needs the validate extra: "):
        validate_tree_against(tmp_path / "no such folder", SHAPES, workers=1)


# --- validate_tree_against ----------------------------------------------------------------------------------------


def test_validate_tree_dataset_folder_reports_every_session_sorted(tmp_path):
    root = _dataset(tmp_path)
    reports = validate_tree_against(root, SHAPES, workers=1)
    assert [Path(r.path).relative_to(root).as_posix() for r in reports] == [
        "scenario1/session_0000.json",
        "scenario1/session_0001.json",
        "scenario2_stagger/session_0000.json",
        "scenario2_sync/session_0000.json",
        "scenario3_noisy/session_0000.json",
        "scenario3_stable/session_0000.json",
    ]
    assert all(r.deviations == () for r in reports)
    assert [r.events for r in reports] == [6, 6, 6, 6, 2, 3]


def test_validate_tree_two_workers_match_one_worker(tmp_path):
    root = _dataset(tmp_path)
    _write(root / "scenario2_stagger", 1, _fan("scenario2_stagger-0001", "scenario2_stagger", STAGGER_SERIALIZED))
    assert validate_tree_against(root, SHAPES, workers=2) == validate_tree_against(root, SHAPES, workers=1)


def test_validate_tree_root_holding_sessions_validates_them(tmp_path, capsys):
    folder = tmp_path / "scenario3_noisy"
    for i in range(3):
        _write(folder, i, _chain(f"scenario3_noisy-{i:04d}", "scenario3_noisy", 2 + i))
    reports = validate_tree_against(folder, SHAPES, workers=1, progress=True)
    assert [r.events for r in reports] == [2, 3, 4]
    assert "validated 3/3 files" in capsys.readouterr().err


def test_validate_tree_no_sessions_raises(tmp_path):
    (tmp_path / "scenario1").mkdir()
    with pytest.raises(ValidationError, match="no session_"):
        validate_tree_against(tmp_path, SHAPES, workers=1)


# --- summary_table / describe_file --------------------------------------------------------------------------------


def test_summary_table_one_row_per_directory_with_first_deviations():
    reports = [
        FileReport("t/scenario1/session_0000.json", "scenario1", 6, ()),
        FileReport("t/scenario1/session_0001.json", "scenario1", 5, ("5 events, expected 6", "event 3: x", "a", "b")),
        FileReport("t/scenario2_sync/session_0000.json", "scenario2_sync", 6, ()),
    ]
    table = summary_table(reports)
    rows = [line.split() for line in table.splitlines()]
    assert rows[0] == ["directory", "files", "events", "ok", "failed"]
    assert rows[1] == ["scenario1", "2", "11", "1", "1"]
    assert rows[2] == ["scenario2_sync", "1", "6", "1", "0"]
    assert rows[3] == ["total", "3", "17", "2", "1"]
    assert "scenario1/session_0001.json: 5 events, expected 6" in table
    assert "scenario1/session_0001.json: a" in table and ": b" not in table  # only the first three


def test_describe_file_lists_every_event_and_segment_kind(tmp_path):
    path = _write(tmp_path / "scenario1", 0, _chain("scenario1-0000", "scenario1", 6, (3, 5)))
    text = describe_file(path, SHAPES)
    for i in range(6):
        assert f"event {i} event_{i:03d}_scenario1-0000-t{i + 1}: t=" in text
    assert text.count("segment unique:") == 6
    assert text.count("segment shared:") == text.count("segment output:") == 5
    assert "tool_call_ids_matched" in text and "full_match" in text
    assert text.count("expected_output_is_tool_call=True") == 2
    assert "wait_ms=1000" in text and "deviations: none" in text
