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
from ..formats.atomic import write_atomically
from ..formats.compression import ZSTD_SUFFIX
from ..formats.config_dialect import (
    METRICS_TYPES,
    REPORT_LABELS,
    SERVER_TYPES,
    SOURCES,
    check_label,
    check_outputs_mode,
    replay_modes,
    replay_source,
    report_section,
)
from ..formats.rows import dataset_file
from .scenarios import ConfigEntry, in_spec
from .spec import Spec

__all__ = [
    "ConfigEntry",
    "ConfigOptions",
    "config_layout",
    "render_configs",
    "write_configs",
    "reports_root",
]

# A fixed worker count keeps the committed configs machine-independent (inference-perf defaults to cpu_count()).
NUM_WORKERS = 4
SCRAPE_INTERVAL_S = 15


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
            write_atomically(target, text)
        except OSError as exc:
            raise OutputError(f"cannot write {target}: {exc.strerror or exc}; check the folder's permissions") from exc
        written.append(target)
    return written
