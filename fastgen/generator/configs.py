"""The inference-perf 0.7.0 configs of the benchmark (17 for the design's spec), rendered from the spec: each
scenario says which configs it has (its ConfigEntry list), this module turns them into YAML.

Rendering is pure (spec and paths in, YAML text out, byte-identical on every run); writing is a separate step.
Every key is one that inference-perf 0.7.0's strict config models accept (they forbid unknown keys).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Optional

import yaml

from ..errors import OutputError, SpecError
from ..formats.compression import ZSTD_SUFFIX
from ..formats.rows import dataset_file
from .scenarios import ConfigEntry, in_spec
from .spans import REPORT_LABELS
from .spec import Spec

__all__ = [
    "ConfigEntry",
    "ConfigOptions",
    "METRICS_TYPES",
    "OUTPUTS_MODES",
    "SERVER_TYPES",
    "SOURCES",
    "TOOL_CALL_MAX_TOKENS_MODES",
    "TOOL_CHOICE_MODES",
    "check_label",
    "config_layout",
    "check_outputs_mode",
    "render_configs",
    "replay_modes",
    "replay_source",
    "report_section",
    "write_configs",
    "reports_root",
]

SERVER_TYPES = ("vllm", "sglang")
# A fixed worker count keeps the committed configs machine-independent (inference-perf defaults to cpu_count()).
NUM_WORKERS = 4
SCRAPE_INTERVAL_S = 15
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


@dataclass(frozen=True)
class ConfigOptions:
    """What the configs say about the server and the run, beyond the spec."""

    server_type: str = "vllm"
    base_url: str = "http://localhost:8000"
    prometheus_url: str = "http://localhost:9090"
    metrics: str = "default"  # "prometheus" only when there is a Prometheus to query
    max_wait_ms: Optional[int] = None
    absolute_paths: bool = False
    label: Optional[str] = None  # the reports' folder under reports/ (default: the server type)
    outputs: str = "live"  # OUTPUTS_MODES
    tool_call_max_tokens: str = "floor"  # TOOL_CALL_MAX_TOKENS_MODES
    tool_choice: str = "forced"  # TOOL_CHOICE_MODES
    source: str = "dataset"  # SOURCES


def config_layout(spec: Spec) -> list[ConfigEntry]:
    """The configs for `spec`, scenario by scenario in its order; num_sessions never exceeds a scenario's corpus."""
    return [entry for scenario in in_spec(spec) for entry in scenario.configs(spec)]


def reports_root(config_root: Path) -> Path:
    """Where the configs send inference-perf's reports: a `reports` folder beside the config folder."""
    return Path(os.path.abspath(config_root)).parent / "reports"


def render_configs(
    *,
    spec: Spec,
    model: str,
    base_seed: int,
    trace_root: Path,
    config_root: Path,
    tokenizer_dir: Path,
    server_type: str = "vllm",
    absolute_paths: bool = False,
    base_url: str = "http://localhost:8000",
    prometheus_url: str = "http://localhost:9090",
    metrics: str = "default",
    max_wait_ms: Optional[int] = None,
    label: Optional[str] = None,
    outputs: str = "live",
    tool_call_max_tokens: str = "floor",
    tool_choice: str = "forced",
    source: str = "dataset",
    compressed: bool = False,
) -> dict[str, str]:
    """Relative config path -> YAML text. Paths are relative to each config's folder unless absolute_paths.

    The keyword arguments after tokenizer_dir are ConfigOptions' fields, and `compressed`: the dataset files are
    `.jsonl.zst` (fastgen --compress zstd; `datasets` reads them as they are). Reports go to
    `reports/<label>/<scenario>/<config>/`, so two servers' runs never mix and `fastgen compare` reads either."""
    if server_type not in SERVER_TYPES:
        raise SpecError(f"server type {server_type!r} is not supported; use one of: {', '.join(SERVER_TYPES)}")
    if metrics not in METRICS_TYPES:
        raise SpecError(f"metrics type {metrics!r} is not supported; use one of: {', '.join(METRICS_TYPES)}")
    replay = replay_modes(outputs, tool_call_max_tokens, tool_choice)
    check_outputs_mode(spec, outputs)
    label = check_label(label or server_type)
    if source not in SOURCES:
        raise SpecError(f"source {source!r} is not known; use one of: {', '.join(SOURCES)}")
    rendered = {}
    for entry in config_layout(spec):
        config_dir = Path(config_root) / entry.scenario
        report = reports_root(config_root) / label / entry.scenario / entry.name
        paths = {
            key: _config_path(target, config_dir, absolute_paths)
            for key, target in (
                ("traces", Path(trace_root) / entry.trace_dir),
                ("dataset", Path(trace_root) / (dataset_file(entry.trace_dir) + (ZSTD_SUFFIX if compressed else ""))),
                ("tokenizer", Path(tokenizer_dir)),
                ("report", report),
            )
        }
        document = _document(
            entry,
            paths=paths,
            model=model,
            server_type=server_type,
            base_seed=base_seed,
            base_url=base_url,
            prometheus_url=prometheus_url,
            metrics=metrics,
            max_wait_ms=max_wait_ms,
            replay=replay,
            source=source,
        )
        body = yaml.safe_dump(document, sort_keys=False, default_flow_style=False, allow_unicode=True)
        rendered[entry.path] = _header(entry, absolute_paths, paths["report"], outputs, tool_choice) + body
    return rendered


def _document(
    entry: ConfigEntry,
    *,
    paths: dict[str, str],
    model: str,
    server_type: str,
    base_seed: int,
    base_url: str,
    prometheus_url: str,
    metrics: str,
    max_wait_ms: Optional[int],
    replay: dict[str, object],
    source: str,
) -> dict:
    # Key order here is the order in the file: fixed, so regenerating gives identical bytes.
    return {
        "api": {"type": "chat", "streaming": True},
        # Every span carries the tool catalog, and inference-perf 0.7.0 then sends ignore_eos: false on every request
        # whatever this says: the file says what really happens.
        "server": {"type": server_type, "model_name": model, "base_url": base_url, "ignore_eos": False},
        "data": {
            "type": "otel_trace_replay",
            "otel_trace_replay": _replay_section(replay_source(source, paths), max_wait_ms, replay),
        },
        "load": _load_section(entry, base_seed),
        "metrics": _metrics_section(metrics, prometheus_url),
        "tokenizer": {"pretrained_model_name_or_path": paths["tokenizer"]},
        "report": report_section(),
        "storage": {"local_storage": {"path": paths["report"]}},
    }


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


def check_outputs_mode(spec: Spec, outputs: str) -> None:
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


def _replay_section(source: dict, max_wait_ms: Optional[int], replay: dict[str, object]) -> dict:
    # max_wait_ms caps each recorded think/tool gap the replay sleeps through (inference-perf's default, 15000, when
    # unset). Only quick functional runs (the e2e) lower it; it changes the load's timing, not what is sent.
    section: dict = dict(source)
    if max_wait_ms is not None:
        section["max_wait_ms"] = max_wait_ms
    # Written out even at inference-perf's defaults: the file says what a run measures (see OUTPUTS_MODES).
    section.update(replay)
    section["attribute_to_label_map"] = dict(REPORT_LABELS)
    return section


def _metrics_section(metrics: str, prometheus_url: str) -> dict:
    # "default" queries no Prometheus: inference-perf then skips the scrape_interval + 2 s wait after the load and
    # writes no server-metrics report (request and session reports are computed client-side either way).
    if metrics == "default":
        return {"type": "default"}
    return {"type": "prometheus", "prometheus": {"url": prometheus_url, "scrape_interval": SCRAPE_INTERVAL_S}}


def _load_section(entry: ConfigEntry, base_seed: int) -> dict:
    stage: dict = {"concurrent_sessions": entry.concurrent_sessions, "num_sessions": entry.num_sessions}
    if entry.session_rate is not None:
        stage["session_rate"] = entry.session_rate
    return {
        "type": "trace_session_replay",
        "base_seed": base_seed,
        "num_workers": NUM_WORKERS,
        # Every queued event of a session holds a worker slot while it waits, and inference-perf pins a session to
        # a worker by hash(session_id), which need not spread evenly: size each worker for the whole load.
        "worker_max_concurrency": entry.concurrent_sessions * entry.events_per_session,
        "stages": [stage],
    }


def check_label(label: str) -> str:
    """A run label is one folder name: letters, digits, dot, dash, underscore."""
    if not label or not all(c.isalnum() or c in "._-" for c in label) or label.startswith("."):
        raise SpecError(f"label {label!r} is not a folder name; use letters, digits, '.', '-' or '_' (e.g. vllm-a100)")
    return label


def _config_path(target: Path, config_dir: Path, absolute: bool) -> str:
    # inference-perf opens these from the working directory, so relative ones assume `cd <config folder>`.
    resolved = target.resolve()
    if absolute:
        return resolved.as_posix()
    return Path(os.path.relpath(resolved, config_dir.resolve())).as_posix()


def _header(entry: ConfigEntry, absolute: bool, report: str, outputs: str, tool_choice: str) -> str:
    # Nothing here depends on where the folders are: the same text is true wherever --config-dir points.
    name = PurePosixPath(entry.path).name
    if absolute:
        lines = [
            f"# generated by fastgen (absolute paths): inference-perf --config_file {name}, from any folder",
            f"# reports go to {report}",
        ]
    else:
        lines = [
            f"# generated by fastgen; paths are relative to this file's folder: cd there, then "
            f"inference-perf --config_file {name}",
            f"# reports go to {report} from there (a reports folder beside the config folder)",
        ]
    lines += [
        f"# {entry.about}",
        "# output lengths are not pinned: every span carries the tool catalog, so inference-perf sends ignore_eos "
        "false and each engine decodes until it stops (at most the recorded count on text turns); compare "
        "output-token totals and per-token latencies",
        "# later turns carry each engine's own answers (fastgen --outputs live): prompts differ between engines from "
        "turn 2 on"
        if outputs == "live"
        else "# later turns carry the recorded answers (fastgen --outputs recorded): every engine replays the same prompts",
        "# the recorded tool is forced by name, text turns send tool_choice none (fastgen --tool-choice forced): SGLang "
        "renders only the named tool, or none, into those prompts, vLLM every tool"
        if tool_choice == "forced"
        else "# no tool_choice is sent (fastgen --tool-choice as_recorded): every engine renders every tool into every prompt "
        "and answers a tool-call turn as its model chooses",
    ]
    return "".join(line + "\n" for line in lines)


def write_configs(config_root: Path, rendered: dict[str, str]) -> list[Path]:
    """Write each config via a temporary file and a rename, so a reader never sees half a file."""
    root = Path(config_root)
    written = []
    for relative, text in sorted(rendered.items()):
        parts = PurePosixPath(relative).parts
        if PurePosixPath(relative).is_absolute() or ".." in parts:
            raise OutputError(f"config path {relative!r} leaves the config folder; use a path like 'scenario1/c10.yml'")
        target = root.joinpath(*parts)
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            _write_atomically(target, text)
        except OSError as exc:
            raise OutputError(f"cannot write {target}: {exc.strerror or exc}; check the folder's permissions") from exc
        written.append(target)
    return written


def _write_atomically(target: Path, text: str) -> None:
    # os.open with 0o666 honours the umask (mkstemp would leave the config readable by its owner only).
    temp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as handle:
            handle.write(text)
        os.replace(temp, target)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
