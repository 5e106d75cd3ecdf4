"""Read one server's runs: every run folder under a root (as `fastgen bakeoff` writes them, or reports of configs
run by hand), as the records the report needs.

A request's turn, kind and session come from the labels fastgen's configs ask inference-perf to copy from the span
attributes; its cached tokens from the server's own `usage`. Request times are inference-perf's perf_counter
seconds (comparable within one run only), session times epoch seconds. A missing or malformed file is a problem
named in the result, and reading goes on with the rest.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Optional

import yaml

from ..bakeoff.runs import METRICS_FILE, RUN_CONFIG_FILE, read_run

__all__ = ["ConfigRun", "RequestRecord", "SessionRecord", "read_runs"]

PER_REQUEST = "per_request_lifecycle_metrics.json"
PER_SESSION = "per_session_lifecycle_metrics.json"
INFERENCE_PERF_CONFIG = "config.yaml"  # what inference-perf writes beside its reports


@dataclass(frozen=True)
class RequestRecord:
    session: str
    trace_dir: str
    turn: int
    kind: str  # text, tool_call, root, branch
    start: float
    end: float
    prompt_tokens: Optional[int]  # the server's usage; None when it sent none
    cached_tokens: Optional[int]
    output_tokens: Optional[int]
    ttft: Optional[float]  # None on tool-call turns: they stream tool_calls deltas, which inference-perf does not time
    latency: Optional[float]
    ntpot: Optional[float]
    tpot: Optional[float]
    failed: bool


@dataclass(frozen=True)
class SessionRecord:
    session: str
    success: bool
    start: float
    end: float


@dataclass
class ConfigRun:
    name: str  # scenario1/c10
    status: str  # completed, failed, or "reports" for a folder with reports and no bakeoff record
    engine: Optional[str] = None
    concurrency: Optional[int] = None
    session_rate: Optional[float] = None
    seconds: Optional[float] = None
    reason: Optional[str] = None
    requests: list[RequestRecord] = field(default_factory=list)
    sessions: list[SessionRecord] = field(default_factory=list)
    samples: list[tuple[float, dict]] = field(default_factory=list)  # (epoch s, metrics) from /metrics

    @property
    def scenario(self) -> str:
        return PurePosixPath(self.name).parent.as_posix()

    @property
    def config(self) -> str:
        return PurePosixPath(self.name).name


def read_runs(root: Path) -> tuple[dict[str, ConfigRun], list[str]]:
    """{config name: its run} for every run folder under root, and the problems met, one line each."""
    root = Path(root)
    problems: list[str] = []
    if not root.is_dir():
        return {}, [f"{root} is not a folder of runs; give the folder fastgen bakeoff wrote (OUT/LABEL)"]
    runs = {}
    folders = sorted({p.parent for p in root.rglob(PER_REQUEST)} | {p.parent for p in root.rglob("run.json")})
    for folder in folders:
        if folder.name.endswith(".partial") or ".old-" in folder.name:
            continue
        name = folder.relative_to(root).as_posix()
        run = _read_folder(folder, name, problems)
        if run is not None:
            runs[name] = run
    if not runs:
        problems.append(f"{root} holds no runs (no {PER_REQUEST} below it)")
    return runs, problems


def _read_folder(folder: Path, name: str, problems: list[str]) -> Optional[ConfigRun]:
    record = read_run(folder)
    run = ConfigRun(name=name, status=(record or {}).get("status") or "reports")
    if record:
        run.engine, run.seconds, run.reason = record.get("engine"), record.get("seconds"), record.get("reason")
    run.concurrency, run.session_rate = _stage(folder, problems)
    requests = _load_json(folder / PER_REQUEST, problems, list)
    if requests is None and run.status != "failed":
        return None if record is None else run
    for entry in requests or []:
        try:
            run.requests.append(_request(entry))
        except (KeyError, TypeError, ValueError) as exc:
            problems.append(f"{folder / PER_REQUEST}: an entry without {exc}; skipped")
            break
    for entry in _load_json(folder / PER_SESSION, problems, list) or []:
        try:
            run.sessions.append(SessionRecord(str(entry["session_id"]), bool(entry["success"]),
                                              float(entry["start_time"]), float(entry["end_time"])))
        except (KeyError, TypeError, ValueError):
            problems.append(f"{folder / PER_SESSION}: a malformed session entry; skipped")
            break
    run.samples = _samples(folder / METRICS_FILE, problems) if record else []
    return run


def _load_json(path: Path, problems: list[str], kind: type):
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        problems.append(f"{path} is missing")
        return None
    except (OSError, ValueError) as exc:
        problems.append(f"{path} is not readable JSON ({str(exc)[:80]}); its run is left out")
        return None
    if not isinstance(value, kind):
        problems.append(f"{path} is not a JSON {kind.__name__}; its run is left out")
        return None
    return value


def _request(entry: dict) -> RequestRecord:
    info = entry.get("info") or {}
    labels = info.get("labels") or {}
    usage = (info.get("response_metrics") or {}).get("server_usage") or {}
    computed = entry.get("computed_metrics") or {}
    details = usage.get("prompt_tokens_details") or {}
    prompt = usage.get("prompt_tokens")
    cached = details.get("cached_tokens")
    if prompt is not None and cached is None:
        cached = 0  # vLLM and SGLang send no details when nothing was cached
    return RequestRecord(
        session=labels["session"], trace_dir=labels.get("trace_dir", ""), turn=int(labels["turn"]),
        kind=labels.get("turn_kind", ""), start=float(entry["start_time"]), end=float(entry["end_time"]),
        prompt_tokens=prompt, cached_tokens=cached,
        output_tokens=computed.get("output_tokens"), ttft=computed.get("time_to_first_token"),
        latency=computed.get("request_latency"), ntpot=computed.get("normalized_time_per_output_token"),
        tpot=computed.get("time_per_output_token"), failed=entry.get("error") is not None)


def _samples(path: Path, problems: list[str]) -> list[tuple[float, dict]]:
    samples = []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        problems.append(f"{path} is missing (no server metrics for that run)")
        return []
    except OSError as exc:
        problems.append(f"{path} is not readable ({exc.strerror})")
        return []
    for number, line in enumerate(lines, start=1):
        try:
            sample = json.loads(line)
        except ValueError:
            problems.append(f"{path}:{number} is not JSON; the samples after it are left out")
            break
        if isinstance(sample, dict) and isinstance(sample.get("metrics"), dict):
            samples.append((float(sample["t"]), sample["metrics"]))
    return samples


class _TolerantLoader(yaml.SafeLoader):
    """inference-perf dumps its config with Python object tags; read them as the plain mappings they hold."""


def _python_object(loader, suffix, node):
    if isinstance(node, yaml.MappingNode):
        return loader.construct_mapping(node, deep=True)
    if isinstance(node, yaml.SequenceNode):
        return loader.construct_sequence(node, deep=True)
    return loader.construct_scalar(node)


_TolerantLoader.add_multi_constructor("tag:yaml.org,2002:python/", _python_object)


def _stage(folder: Path, problems: list[str]) -> tuple[Optional[int], Optional[float]]:
    """(concurrent_sessions, session_rate) of the run's first load stage."""
    for name in (RUN_CONFIG_FILE, INFERENCE_PERF_CONFIG):
        path = folder / name
        if not path.exists():
            continue
        try:
            stage = yaml.load(path.read_text(encoding="utf-8"), Loader=_TolerantLoader)["load"]["stages"][0]
            stage = stage.get("__dict__", stage)
            rate = stage.get("session_rate")
            return int(stage["concurrent_sessions"]), None if rate is None else float(rate)
        except (OSError, yaml.YAMLError, KeyError, IndexError, TypeError, ValueError):
            problems.append(f"{path}: no load stage with concurrent_sessions; its load level is unknown")
            return None, None
    return None, None
