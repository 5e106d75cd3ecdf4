"""The inference-perf 0.7.0 config dialect fastgen writes and the bakeoff reads back: the replay modes, the report
section, the labels copied onto each request's record, and the reports' folder label.

The generator renders configs with these (generator.configs); the bakeoff rewrites a config's replay section with
them (bakeoff.plan); the command offers their choices. Every key is one that inference-perf 0.7.0's strict config
models accept (they forbid unknown keys).
"""

from __future__ import annotations

from typing import Mapping, Protocol

from ..errors import SpecError

__all__ = [
    "METRICS_TYPES",
    "OUTPUTS_MODES",
    "REPORT_LABELS",
    "SERVER_TYPES",
    "SOURCES",
    "TOOL_CALL_MAX_TOKENS_MODES",
    "TOOL_CHOICE_MODES",
    "check_label",
    "check_outputs_mode",
    "replay_modes",
    "replay_source",
    "report_section",
]

SERVER_TYPES = ("vllm", "sglang")
METRICS_TYPES = ("prometheus", "default")
# What a later turn's prompt holds where an earlier turn's answer was: the engine's own answer (live, inference-perf's
# default: the agent loop as it runs, but from turn 2 on each engine replays different prompts) or the recorded one
# (every engine replays the same prompts, byte for byte: what a side-by-side verdict rests on).
OUTPUTS_MODES = ("live", "recorded")
# max_tokens of a forced tool-call turn: inference-perf's floor, max(4 x recorded, 4096), or the recorded length
# (a model that never closes the call then stops at the recorded length instead of decoding up to 4096 tokens).
TOOL_CALL_MAX_TOKENS_MODES = ("floor", "recorded")
# tool_choice: forced (inference-perf's force_recorded: the recorded tool named on a single-call turn, "required" on
# others, "none" on text turns) or as_recorded (none sent: the engine chooses). SGLang 0.5.23 renders no tools into the
# prompt of a "none" turn and only the named tool into a forced one, vLLM all of them; with as_recorded both engines
# render every tool, so they are sent the same prompts.
TOOL_CHOICE_MODES = ("forced", "as_recorded")
_TOOL_CHOICE_KEYS = {"forced": "force_recorded", "as_recorded": "as_recorded"}  # inference-perf's names
# Where a config reads its sessions: the trace directory's session-per-row file through `datasets` (rows.py: read a
# row at a time from a memory-mapped Arrow cache; scenario3 at c500 ran in 35 s instead of 183 s), or the trace
# directory itself (inference-perf json-parses every file in its parent first).
SOURCES = ("dataset", "traces")

# Span attribute -> the label inference-perf copies onto each per-request record (attribute_to_label_map): what
# `fastgen compare` groups requests by.
REPORT_LABELS = {
    "gen_ai.conversation.id": "session",
    "fastgen.scenario": "trace_dir",
    "fastgen.turn": "turn",
    "fastgen.turn_kind": "turn_kind",
}


class _ScenarioSpec(Protocol):
    @property
    def spawns_subagents(self) -> bool: ...


class _Spec(Protocol):
    """What check_outputs_mode reads of a workload spec (generator.spec.Spec): the formats import no generator."""

    @property
    def scenarios(self) -> Mapping[str, _ScenarioSpec]: ...


def report_section() -> dict:
    """What inference-perf reports. Per-request records are what `fastgen compare` reads: info (labels, the server's
    usage with cached tokens) and computed metrics, without the raw bodies (hundreds of KB per request here) or the
    stream chunks; per-session records give each session's outcome and file."""
    return {
        "request_lifecycle": {
            "summary": True,
            "per_stage": True,
            "per_request": True,
            "per_request_fields": {
                "request": False,
                "response": False,
                "info": True,
                "response_chunks": False,
                "computed_metrics": True,
            },
        },
        "session_lifecycle": {"summary": True, "per_stage": True, "per_session": True},
    }


def check_outputs_mode(spec: _Spec, outputs: str) -> None:
    """Refuse recorded outputs for a workload with sub-agents: inference-perf would send a join's spawning message as
    recorded, with the reports it keeps there for the graph builder only (agent_loop)."""
    if outputs == "recorded" and any(sc.spawns_subagents for sc in spec.scenarios.values()):
        raise SpecError(
            "--outputs recorded sends the recorded assistant messages as they are, and a sub-agent join's spawning "
            "message keeps the reports there for inference-perf's graph builder only (they would go out twice); "
            "use --outputs live, or subagents {lo: 0, hi: 0}"
        )


def replay_modes(outputs: str, tool_call_max_tokens: str, tool_choice: str = "forced") -> dict[str, object]:
    """The otel_trace_replay keys of an outputs mode, a tool-call max_tokens mode and a tool_choice mode
    (OUTPUTS_MODES, TOOL_CALL_MAX_TOKENS_MODES, TOOL_CHOICE_MODES)."""
    if outputs not in OUTPUTS_MODES:
        raise SpecError(f"outputs mode {outputs!r} is not known; use one of: {', '.join(OUTPUTS_MODES)}")
    if tool_call_max_tokens not in TOOL_CALL_MAX_TOKENS_MODES:
        raise SpecError(
            f"tool-call max_tokens mode {tool_call_max_tokens!r} is not known; use one of: "
            f"{', '.join(TOOL_CALL_MAX_TOKENS_MODES)}"
        )
    if tool_choice not in TOOL_CHOICE_MODES:
        raise SpecError(f"tool_choice mode {tool_choice!r} is not known; use one of: {', '.join(TOOL_CHOICE_MODES)}")
    return {
        "disable_output_substitution": outputs == "recorded",
        "override_tool_call_max_tokens": tool_call_max_tokens == "floor",
        "tool_choice_mode": _TOOL_CHOICE_KEYS[tool_choice],
    }


def replay_source(source: str, paths: dict[str, str]) -> dict:
    """The otel_trace_replay keys that name where the sessions are: `paths` has the trace directory ("traces") and
    its dataset file ("dataset"), as the config writes them."""
    if source == "traces":
        return {"trace_directory": paths["traces"]}
    # inference-perf: datasets.load_dataset(path, split=split or "train", **rest): the json loader over one file
    return {"hf_dataset_path": {"path": "json", "data_files": paths["dataset"]}}


def check_label(label: str) -> str:
    """A run label is one folder name: letters, digits, dot, dash, underscore."""
    if not label or not all(c.isalnum() or c in "._-" for c in label) or label.startswith("."):
        raise SpecError(f"label {label!r} is not a folder name; use letters, digits, '.', '-' or '_' (e.g. vllm-a100)")
    return label
