"""What a run ran against, and when a run done before still stands for the same question.

The identity a run record carries: the server (URL, engine, version where its info endpoint says, served model, the
KV capacity in tokens it reports and its block or page size, the GPU count the user gave, its process start time, the
scheduler settings it reports (scheduling.py)), the hash of the dataset's manifest, the hash of the config's bytes, and the outputs and tool-call max_tokens modes of
the config as run. The KV capacity comes from vLLM's `cache_config_info` gauge (its labels num_gpu_blocks x
block_size) or SGLang's `max_total_num_tokens` (its gauge, else /get_server_info with its page_size).

A resume skips a run only when it completed and its identity still holds (SAME_RUN_KEYS: the process start and
the version may change, a restart of the same server with the same cache is the same question); and a label whose
runs came from another server (SAME_SERVER_KEYS) is refused before the first config.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Optional

from ..errors import OutputError, ServerError
from ..extras import import_extra
from ..formats.config_document import ConfigDocument
from ..formats.rows import trace_dir_of
from .plan import replay_modes_of
from .runs import recorded_runs
from .scheduling import scheduler_settings
from .server import LiveServer

__all__ = [
    "SAME_RUN_KEYS",
    "SAME_SERVER_KEYS",
    "check_label_server",
    "identity_change",
    "process_start",
    "run_identity",
    "server_identity",
]

SAME_SERVER_KEYS = ("url", "engine", "model")
SAME_RUN_KEYS = (
    ("server", "url"),
    ("server", "engine"),
    ("server", "model"),
    ("server", "kv_capacity_tokens"),
    ("dataset_sha256",),
    ("config_sha256",),
    ("outputs",),
    ("tool_call_max_tokens",),
    ("tool_choice",),
    ("reset",),
    ("router", "policy"),
    ("router", "replica_urls"),
    ("shards",),
)
# what a key recorded by an older fastgen meant where it was not recorded yet (other keys: None, not known)
_BEFORE: dict[tuple[str, ...], Any] = {("shards",): 1}
# how a changed key reads in the line that says why a run is done again
_CHANGES = {
    "url": "another server URL",
    "engine": "another engine",
    "model": "another model",
    "kv_capacity_tokens": "another KV capacity",
    "dataset_sha256": "the dataset changed",
    "config_sha256": "the config changed",
    "outputs": "another outputs mode",
    "tool_call_max_tokens": "another tool-call max_tokens mode",
    "tool_choice": "another tool_choice mode",
    "reset": "the cache was reset between runs in one and not the other (--no-reset)",
    "policy": "another routing policy",
    "replica_urls": "other replicas behind the router",
    "shards": "another number of shards (--shards)",
}


def server_identity(server: LiveServer, model: str, gpus: Optional[int] = None) -> dict:
    """The server part of a run's identity, read now from its /metrics and info endpoint."""
    families = _families(_metrics_or_empty(server))
    info = server.info()
    capacity, block = _vllm_capacity(families, server.engine.name) or _sglang_capacity(
        families, info, server.engine.name
    )
    version = info.get("version")
    return {
        "url": server.url,
        "engine": server.engine.name,
        "version": str(version) if version else None,
        "model": model,
        "kv_capacity_tokens": capacity,
        "block_size": block,
        "gpus": gpus,
        "process_start": _process_start(families),
        # what decides which requests run together (scheduling.py), for analyze --server-from; None: not reported
        "scheduler": scheduler_settings(server, info),
    }


def process_start(server: LiveServer) -> Optional[float]:
    """The server's process_start_time_seconds; None when /metrics does not say (or does not answer)."""
    return _process_start(_families(_metrics_or_empty(server)))


def run_identity(
    server: dict,
    *,
    config_path: Path,
    run_config: dict,
    reset: bool,
    router: Optional[dict] = None,
    shards: int = 1,
) -> dict:
    """The identity of one run: `server` (server_identity), the config's bytes and its dataset (the manifest's sha256
    and the workload it names), the replay modes of `run_config` (the config as run, parsed), whether the cache
    was reset before it, the router in front of the engines (fleet.py; None: none), and how many inference-perf
    processes replayed it (shards: N load generators, each its own sessions, is another load than one)."""
    replay = ConfigDocument(run_config).replay
    outputs, tool_calls, tool_choice = replay_modes_of(replay)
    manifest = _dataset_manifest(Path(trace_dir_of(replay)))
    return {
        "server": server,
        "dataset_sha256": None if manifest is None else hashlib.sha256(manifest).hexdigest(),
        "workload": _workload(manifest),
        "config_sha256": hashlib.sha256(Path(config_path).read_bytes()).hexdigest(),
        "outputs": outputs,
        "tool_call_max_tokens": tool_calls,
        "tool_choice": tool_choice,
        "reset": reset,
        "router": router,
        "shards": shards,
    }


def _dataset_manifest(trace_directory: Path) -> Optional[bytes]:
    for folder in (Path(trace_directory), Path(trace_directory).parent):
        try:
            return (folder / "manifest.json").read_bytes()
        except OSError:
            continue
    return None


def _workload(manifest: Optional[bytes]) -> Optional[str]:
    """The workload the dataset's manifest names (a shipped one's name, or a file's), for the report's setup."""
    if manifest is None:
        return None
    try:
        return str(json.loads(manifest)["arguments"]["workload"])
    except (TypeError, ValueError, KeyError):
        return None


def identity_change(previous: Optional[dict], now: dict) -> Optional[str]:
    """Why a run recorded with identity `previous` does not stand for one with identity `now` (None: it does)."""
    if not isinstance(previous, dict):
        return "it was run by an older fastgen"
    for path in SAME_RUN_KEYS:
        before, after = _get(previous, path), _get(now, path)
        before = _BEFORE.get(path) if before is None and isinstance(previous, dict) else before
        # None is "not known" (a /metrics that failed once, a key an earlier format did not record): not a change
        if before is not None and after is not None and before != after:
            return _CHANGES[path[-1]]
    return None


def check_label_server(label_folder: Path, server: dict) -> None:
    """Refuse (OutputError) a label folder whose finished runs came from another server than `server`."""
    for folder, record in recorded_runs(label_folder):
        recorded = record.server
        if recorded is None:
            continue
        differs = [
            key for key in SAME_SERVER_KEYS if recorded.get(key) is not None and recorded.get(key) != server.get(key)
        ]
        if differs:
            raise OutputError(
                f"{label_folder} holds runs from {recorded.get('url')} ({_describe(recorded)}; "
                f"{folder.relative_to(label_folder).as_posix()}), not from {server['url']} ({_describe(server)}); "
                f"pass a new --label for this server, or --rerun to replace those runs"
            )


def _describe(server: dict) -> str:
    return ", ".join(str(server[key]) for key in ("engine", "model") if server.get(key))


def _get(document: Any, path: tuple[str, ...]):
    for key in path:
        document = document.get(key) if isinstance(document, dict) else None
    return document


def _metrics_or_empty(server: LiveServer) -> str:
    try:
        return server.metrics_text()
    except (OSError, ServerError):
        return ""


def _families(text: str) -> dict[str, list]:
    """Metric family name -> its samples, as prometheus_client parses them (labels kept apart, not summed)."""
    parser = import_extra("prometheus_client.parser", extra="bakeoff", command="fastgen bakeoff")
    try:
        return {family.name: list(family.samples) for family in parser.text_string_to_metric_families(text)}
    except ValueError:
        return {}


def _process_start(families: dict[str, list]) -> Optional[float]:
    samples = families.get("process_start_time_seconds") or []
    return float(samples[0].value) if samples else None


def _vllm_capacity(families: dict[str, list], engine: str) -> Optional[tuple[int, int]]:
    for sample in families.get(f"{engine}:cache_config_info") or []:
        blocks, block = _int(sample.labels.get("num_gpu_blocks")), _int(sample.labels.get("block_size"))
        if blocks and block:
            return blocks * block, block
    return None


def _sglang_capacity(families: dict[str, list], info: dict, engine: str) -> tuple[Optional[int], Optional[int]]:
    # newer SGLang lists the scheduler's state under internal_states; older ones at the top
    states = [info, *[s for s in info.get("internal_states") or [] if isinstance(s, dict)]]
    page = next((_int(s.get("page_size")) for s in states if _int(s.get("page_size"))), None)
    samples = families.get(f"{engine}:max_total_num_tokens") or []
    tokens = _int(samples[0].value) if samples else None
    if not tokens:
        tokens = next(
            (_int(s.get("max_total_num_tokens")) for s in states if _int(s.get("max_total_num_tokens"))), None
        )
    return tokens, page


def _int(value) -> Optional[int]:
    try:
        number = int(float(value))
    except (TypeError, ValueError):
        return None
    return number if number > 0 else None
