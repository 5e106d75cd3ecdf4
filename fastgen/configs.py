"""The 17 inference-perf 0.7.0 configs of the benchmark, rendered from the spec.

Rendering is pure (spec and paths in, YAML text out, byte-identical on every run); writing is a separate step.
Every key is one that inference-perf 0.7.0's strict config models accept (they forbid unknown keys).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Optional

import yaml

from .errors import OutputError, SpecError
from .spec import Spec

__all__ = ["ConfigEntry", "METRICS_TYPES", "SERVER_TYPES", "config_layout", "render_configs", "write_configs"]

SERVER_TYPES = ("vllm", "sglang")
# A fixed worker count keeps the committed configs machine-independent (inference-perf defaults to cpu_count()).
NUM_WORKERS = 4
# Scenario 1's turn shape is fixed by the design (six turns, one request each); the spec holds only its budgets.
SCENARIO1_EVENTS = 6
SCRAPE_INTERVAL_S = 15
METRICS_TYPES = ("prometheus", "default")


@dataclass(frozen=True)
class ConfigEntry:
    """One config file: where it goes, which trace directory it replays, and its single load stage."""

    path: str  # relative to the config root, e.g. "scenario1/c10.yml"
    trace_dir: str  # relative to the trace root, e.g. "scenario1"
    concurrent_sessions: int
    num_sessions: int
    events_per_session: int  # the most requests one session can have queued at once
    session_rate: Optional[float] = None

    @property
    def scenario(self) -> str:
        return PurePosixPath(self.path).parent.name

    @property
    def name(self) -> str:
        return PurePosixPath(self.path).stem


def config_layout(spec: Spec) -> list[ConfigEntry]:
    """The configs for `spec`, in a fixed order; num_sessions never exceeds the scenario's corpus."""
    s1, s2, s3 = spec.scenario1, spec.scenario2, spec.scenario3
    entries = [
        ConfigEntry(f"scenario1/c{level}.yml", "scenario1", level, s1.sessions, SCENARIO1_EVENTS)
        for level in s1.concurrency
    ]
    for level in s2.concurrency:
        for timing in ("sync", "stagger"):
            entries.append(
                ConfigEntry(
                    f"scenario2/c{level}_{timing}.yml",
                    f"scenario2_{timing}",
                    level,
                    min(level, s2.sets),
                    1 + len(s2.branches),  # the root and its parallel branches
                )
            )
    for level in s3.concurrency:
        sessions = min(level, s3.sessions)
        for layout in ("stable", "noisy"):
            # inference-perf spaces starts by 1/session_rate, so this spreads the arrivals over the window.
            entries.append(
                ConfigEntry(
                    f"scenario3/c{level}_{layout}.yml",
                    f"scenario3_{layout}",
                    level,
                    sessions,
                    s3.turns.hi,
                    session_rate=sessions / s3.arrival_window_s,
                )
            )
    return entries


def render_configs(
    *,
    spec: Spec,
    model: str,
    server_type: str,
    base_seed: int,
    trace_root: Path,
    config_root: Path,
    tokenizer_dir: Path,
    absolute_paths: bool = False,
    base_url: str = "http://localhost:8000",
    prometheus_url: str = "http://localhost:9090",
    metrics: str = "prometheus",
    max_wait_ms: Optional[int] = None,
) -> dict[str, str]:
    """Relative config path -> YAML text. Paths are relative to each config's folder unless absolute_paths."""
    if server_type not in SERVER_TYPES:
        raise SpecError(f"server type {server_type!r} is not supported; use one of: {', '.join(SERVER_TYPES)}")
    if metrics not in METRICS_TYPES:
        raise SpecError(f"metrics type {metrics!r} is not supported; use one of: {', '.join(METRICS_TYPES)}")
    rendered = {}
    for entry in config_layout(spec):
        config_dir = Path(config_root) / entry.scenario
        # configs/ and reports/ are siblings at the repository root; inference-perf fills in {timestamp}.
        report = Path(config_root).parent / "reports" / entry.scenario / f"{entry.name}-{{timestamp}}"
        paths = {
            key: _config_path(target, config_dir, absolute_paths)
            for key, target in (
                ("traces", Path(trace_root) / entry.trace_dir),
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
        )
        body = yaml.safe_dump(document, sort_keys=False, default_flow_style=False, allow_unicode=True)
        rendered[entry.path] = _header(entry, config_root, absolute_paths) + body
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
) -> dict:
    # Key order here is the order in the file: fixed, so regenerating gives identical bytes.
    return {
        "api": {"type": "chat", "streaming": True},
        "server": {"type": server_type, "model_name": model, "base_url": base_url, "ignore_eos": True},
        "data": {"type": "otel_trace_replay", "otel_trace_replay": _replay_section(paths["traces"], max_wait_ms)},
        "load": _load_section(entry, base_seed),
        "metrics": _metrics_section(metrics, prometheus_url),
        "tokenizer": {"pretrained_model_name_or_path": paths["tokenizer"]},
        "report": {
            "request_lifecycle": {"summary": True, "per_stage": True, "per_request": False},
            "session_lifecycle": {"summary": True, "per_stage": True, "per_session": True},
        },
        "storage": {"local_storage": {"path": paths["report"]}},
    }


def _replay_section(trace_directory: str, max_wait_ms: Optional[int]) -> dict:
    # max_wait_ms caps each recorded think/tool gap the replay sleeps through (inference-perf's default, 15000, when
    # unset). Only quick functional runs (the e2e) lower it; it changes the load's timing, not what is sent.
    section: dict = {"trace_directory": trace_directory}
    if max_wait_ms is not None:
        section["max_wait_ms"] = max_wait_ms
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


def _header(entry: ConfigEntry, config_root: Path, absolute: bool) -> str:
    name = PurePosixPath(entry.path).name
    if absolute:
        return f"# generated by fastgen (absolute paths): inference-perf --config_file {name}\n"
    folder = f"{Path(config_root).name}/{entry.scenario}"
    return (
        f"# generated by fastgen; paths are relative to {folder}: "
        f"cd {folder} && inference-perf --config_file {name}\n"
    )


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
