"""Read one server's runs: every run folder under a root (as `fastgen bakeoff` writes them, or reports of configs
run by hand), as the records the report needs.

Layouts read: OUT/LABEL/<scenario>/<config>/repeat-K/ (run.json format 2, one folder per repeat); reports directly
in the config's folder with run.json format 1 or none (an older bakeoff, or configs run by hand) as one repeat.

A request's turn, kind and session come from the labels fastgen's configs ask inference-perf to copy from the span
attributes; its cached tokens from the server's own `usage`. Request times are inference-perf's perf_counter
seconds (comparable within one run only), session times epoch seconds. A missing or malformed file is a problem
named in the result, and reading goes on with the rest.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Optional

import yaml

from ..bakeoff.identity import identity_change
from ..bakeoff.status import RunCounts, count_records, request_failed, session_failed
from ..formats.config_document import ConfigDocument
from ..formats.rows import trace_dir_of
from ..formats.run_folder import (
    INFERENCE_PERF_CONFIG,
    METRICS_FILE,
    PER_REQUEST_FILE as PER_REQUEST,
    PER_SESSION_FILE as PER_SESSION,
    RUN_CONFIG_FILE,
    repeat_of,
    report_folders,
    run_folders,
)
from ..formats.run_record import RunRecord, read_run

__all__ = ["ConfigRun", "Repeat", "RequestRecord", "SessionRecord", "read_runs"]


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
    itl: Optional[float] = None  # inference-perf's mean gap between streamed tokens; None without two content tokens
    repeat: int = 1  # which run of the config (1-based); times compare only within one
    config: str = ""  # the config it ran in (scenario1/c10): with the session, the unit the report resamples
    # what the engine answered, from inference-perf's output_message: "tool_call" (it streamed tool_calls), "text"
    # (content only), "nothing" (neither), None (not recorded); `kind` is the recorded turn's
    answered: Optional[str] = None


@dataclass(frozen=True)
class SessionRecord:
    session: str
    success: bool
    start: float
    end: float
    repeat: int = 1


@dataclass
class Repeat:
    """One run of a config (the bakeoff's repeat-K folder, or an older layout's single run)."""

    index: int  # 1-based
    folder: Path
    status: str  # completed, incomplete, failed; "reports" for inference-perf's reports without a bakeoff record
    reason: Optional[str] = None
    requests_failed: int = 0  # failed or lost (expected but never recorded)
    requests_total: int = 0
    sessions_failed: int = 0
    sessions_total: int = 0
    identity: dict = field(default_factory=dict)  # run.json's identity (format 2); {} before
    reset: dict = field(default_factory=dict)  # {"done", "verified", "how"}
    engine: Optional[str] = None
    seconds: Optional[float] = None
    ended: Optional[float] = None  # epoch s, from run.json: which repeat is the newest
    errors: list[str] = field(default_factory=list)
    requests: list[RequestRecord] = field(default_factory=list)
    sessions: list[SessionRecord] = field(default_factory=list)
    samples: list[tuple[float, dict]] = field(default_factory=list)  # (epoch s, metrics) from /metrics
    fleet: dict = field(default_factory=dict)  # run.json's fleet: each replica's figures behind a router; {} none
    config_dir: Optional[str] = None  # the config folder the bakeoff ran it from (run.json; None before)

    @property
    def server(self) -> dict:
        return self.identity.get("server") or {}


# worst first: a config's status is its worst repeat's
_STATUS_ORDER = ("failed", "incomplete", "reports", "completed")


@dataclass
class ConfigRun:
    """A config's runs against one server: one per repeat, each with its own clock."""

    name: str  # scenario1/c10
    repeats: list[Repeat] = field(default_factory=list)
    concurrency: Optional[int] = None
    session_rate: Optional[float] = None
    trace_directory: Optional[str] = None  # the trace folder its first repeat replayed (its run-config.yml)

    @property
    def config_dir(self) -> Optional[str]:
        """The config folder the bakeoff ran it from (run.json), None where the runs did not record it."""
        return next((r.config_dir for r in self.repeats if r.config_dir), None)

    @property
    def scenario(self) -> str:
        return PurePosixPath(self.name).parent.as_posix()

    @property
    def config(self) -> str:
        return PurePosixPath(self.name).name

    @property
    def status(self) -> str:
        """The worst repeat's status."""
        found = {r.status for r in self.repeats}
        return next((s for s in _STATUS_ORDER if s in found), "failed")

    @property
    def usable(self) -> bool:
        """Every repeat ran to the end with every request and session succeeding."""
        return self.status in ("completed", "reports")

    @property
    def reason(self) -> Optional[str]:
        return next(
            (f"repeat {r.index}: {r.reason}" if len(self.repeats) > 1 else r.reason for r in self.repeats if r.reason),
            None,
        )

    @property
    def engine(self) -> Optional[str]:
        return next(
            (r.server.get("engine") or r.engine for r in self.repeats if r.server.get("engine") or r.engine), None
        )

    @property
    def seconds(self) -> Optional[float]:
        found = [r.seconds for r in self.repeats if r.seconds is not None]
        return sum(found) if found else None

    @property
    def requests(self) -> list[RequestRecord]:
        """Every repeat's requests, pooled (each carries its repeat)."""
        return [q for r in self.repeats for q in r.requests]

    @property
    def sessions(self) -> list[SessionRecord]:
        return [s for r in self.repeats for s in r.sessions]

    @property
    def samples(self) -> list[tuple[float, dict]]:
        return [s for r in self.repeats for s in r.samples]

    @property
    def requests_failed(self) -> int:
        return sum(r.requests_failed for r in self.repeats)

    @property
    def requests_total(self) -> int:
        return sum(r.requests_total for r in self.repeats)

    @property
    def sessions_failed(self) -> int:
        return sum(r.sessions_failed for r in self.repeats)

    @property
    def sessions_total(self) -> int:
        return sum(r.sessions_total for r in self.repeats)

    def identity_values(self, *keys: str) -> list:
        """The distinct values (in repeat order, None left out) of one identity entry, e.g. ("server", "engine")."""
        found = []
        for r in self.repeats:
            value: Any = r.identity
            for key in keys:
                value = value.get(key) if isinstance(value, dict) else None
            if value is not None and value not in found:
                found.append(value)
        return found


def read_runs(root: Path) -> tuple[dict[str, ConfigRun], list[str]]:
    """{config name: its run} for every run folder under root, and the problems met, one line each.

    A config's runs are its `repeat-K/` folders; a folder of reports directly in the config's folder (an older
    bakeoff, or a config run by hand) is its single repeat."""
    root = Path(root)
    problems: list[str] = []
    if not root.is_dir():
        return {}, [f"{root} is not a folder of runs; give the folder fastgen bakeoff wrote (OUT/LABEL)"]
    found: dict[str, dict[int, Path]] = {}
    for folder in run_folders(root, with_reports=True):
        if folder == root:
            continue
        number = repeat_of(folder)
        config, index = (folder.parent, number) if number is not None else (folder, 0)
        found.setdefault(config.relative_to(root).as_posix(), {})[index] = folder
    runs = {}
    for name in sorted(found):
        by_index = found[name]
        if 0 in by_index and len(by_index) > 1:
            problems.append(f"{by_index[0]} holds an older run beside repeat folders; the older run is left out")
            del by_index[0]
        run = ConfigRun(name=name)
        for index in sorted(by_index):
            repeat = _read_folder(by_index[index], max(index, 1), problems, name)
            if repeat is not None:
                run.repeats.append(repeat)
        run.repeats = _same_runs(name, run.repeats, problems)
        if run.repeats:
            run.concurrency, run.session_rate, run.trace_directory = _stage(run.repeats[0].folder, problems)
            runs[name] = run
    if not runs:
        problems.append(f"{root} holds no runs (no {PER_REQUEST} below it)")
    return runs, problems


def _same_runs(name: str, repeats: list[Repeat], problems: list[str]) -> list[Repeat]:
    """The repeats that ran what the newest one ran: a repeat-K left from an earlier bakeoff with more repeats, whose
    server, capacity, dataset, config or modes differ (bakeoff.identity's rules), is named and left out."""
    recorded = [r for r in repeats if r.identity]
    if not recorded:
        return repeats
    newest = max(recorded, key=lambda r: (r.ended or 0.0, r.index))
    kept = []
    for repeat in repeats:
        change = identity_change(repeat.identity, newest.identity) if repeat.identity else None
        if change is None:
            kept.append(repeat)
        else:
            problems.append(
                f"{name} repeat {repeat.index} is left out: it is not the run the newest repeat "
                f"({newest.index}) is ({change}); run the bakeoff with --repeat {newest.index} or more "
                f"again to replace it"
            )
    return kept


def _read_folder(folder: Path, index: int, problems: list[str], name: str = "") -> Optional[Repeat]:
    record = read_run(folder)
    repeat = Repeat(index=index, folder=folder, status="reports")
    if record:
        repeat.index, repeat.status = record.repeat or index, record.status or "reports"
        repeat.engine, repeat.seconds, repeat.reason = record.engine, record.seconds, record.reason
        repeat.ended, repeat.identity, repeat.errors = record.ended, record.identity, record.errors
        repeat.reset = record.reset or {"done": None, "verified": None, "how": None}
        repeat.fleet, repeat.config_dir = record.fleet or {}, record.config_dir
    requests = _load_reports(folder, PER_REQUEST, problems)
    if requests is None and repeat.status != "failed":
        return None if record is None else repeat
    entries = [e for e in requests or [] if isinstance(e, dict)]
    for entry in entries:
        try:
            repeat.requests.append(_request(entry, repeat.index, name))
        except (KeyError, TypeError, ValueError) as exc:
            problems.append(f"{folder / PER_REQUEST}: an entry without {exc}; skipped")
            break
    session_list = _load_reports(folder, PER_SESSION, problems)
    sessions = [e for e in session_list or [] if isinstance(e, dict)]
    for entry in sessions:
        try:
            repeat.sessions.append(
                SessionRecord(
                    str(entry["session_id"]),
                    not session_failed(entry),
                    float(entry["start_time"]),
                    float(entry["end_time"]),
                    repeat.index,
                )
            )
        except (KeyError, TypeError, ValueError):
            problems.append(f"{folder / PER_SESSION}: a malformed session entry; skipped")
            break
    repeat.samples = _samples(folder / METRICS_FILE, problems) if record else []
    _counts(
        repeat, record or RunRecord(format=1), count_records(entries, sessions if session_list is not None else None)
    )
    return repeat


def _counts(repeat: Repeat, record: RunRecord, seen: RunCounts) -> None:
    """Failed and lost counts: what run.json (format 2) recorded, or what the records show where they show more
    (bakeoff.status.count_records counts both the same way); a run recorded "completed" (format 1) or with no
    record whose records show failures is read as incomplete: a status must not say more than its records."""
    recorded = RunCounts.from_record(record)
    requests_known = record.requests is not None
    merged = RunCounts(
        recorded=max(recorded.recorded, seen.recorded),
        failed=max(recorded.failed, seen.failed),
        expected=recorded.expected if requests_known else seen.expected,
        sessions=recorded.sessions if record.sessions is not None and recorded.sessions else seen.sessions,
        sessions_failed=max(recorded.sessions_failed, seen.sessions_failed),
    )
    repeat.requests_failed = merged.failed + merged.lost
    repeat.requests_total = max(merged.recorded, merged.expected or 0)
    repeat.sessions_failed, repeat.sessions_total = merged.sessions_failed, merged.sessions
    if repeat.status in ("completed", "reports") and (repeat.requests_failed or repeat.sessions_failed):
        repeat.status = "incomplete"
        repeat.reason = repeat.reason or (
            f"{repeat.requests_failed} of {repeat.requests_total} requests failed, "
            f"{repeat.sessions_failed} of {repeat.sessions_total} sessions failed "
            f"(read from the records)"
        )


def _load_reports(folder: Path, name: str, problems: list[str]) -> Optional[list]:
    """One of inference-perf's list reports of a run: a sharded run's is every shard's entries, one after another
    (merged records: its percentiles are the records', never an average of the shards'); None when one is missing."""
    merged: list = []
    for where in report_folders(folder):
        entries = _load_json(where / name, problems, list)
        if entries is None:
            return None
        merged += entries
    return merged


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


def _answered(info: dict) -> Optional[str]:
    message = info.get("output_message")
    if not isinstance(message, dict):
        return None
    if message.get("tool_calls"):
        return "tool_call"
    return "text" if message.get("content") else "nothing"


def _request(entry: dict, repeat: int = 1, config: str = "") -> RequestRecord:
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
        session=labels["session"],
        trace_dir=labels.get("trace_dir", ""),
        turn=int(labels["turn"]),
        kind=labels.get("turn_kind", ""),
        start=float(entry["start_time"]),
        end=float(entry["end_time"]),
        prompt_tokens=prompt,
        cached_tokens=cached,
        output_tokens=computed.get("output_tokens"),
        ttft=computed.get("time_to_first_token"),
        latency=computed.get("request_latency"),
        ntpot=computed.get("normalized_time_per_output_token"),
        tpot=computed.get("time_per_output_token"),
        failed=request_failed(entry),
        itl=computed.get("inter_token_latency"),
        repeat=repeat,
        config=config,
        answered=_answered(info),
    )


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


def _stage(folder: Path, problems: list[str]) -> tuple[Optional[int], Optional[float], Optional[str]]:
    """(concurrent_sessions, session_rate) of the run's first load stage, and the trace folder it replayed."""
    for name in (RUN_CONFIG_FILE, INFERENCE_PERF_CONFIG):
        path = folder / name
        if not path.exists():
            continue
        try:
            document = ConfigDocument(yaml.load(path.read_text(encoding="utf-8"), Loader=_TolerantLoader), dumped=True)
            stage = document.stage
            rate = stage.get("session_rate")
            found = (int(stage["concurrent_sessions"]), None if rate is None else float(rate))
        except (OSError, yaml.YAMLError, KeyError, IndexError, TypeError, ValueError):
            problems.append(f"{path}: no load stage with concurrent_sessions; its load level is unknown")
            return None, None, None
        return (*found, _trace_directory(document))
    return None, None, None


def _trace_directory(document: ConfigDocument) -> Optional[str]:
    try:
        found = trace_dir_of(document.replay)
    except (KeyError, TypeError, AttributeError):
        return None
    return found if isinstance(found, str) else None
