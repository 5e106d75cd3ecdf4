"""How a run ended, from what inference-perf wrote, so that its status cannot say more than the run did.

    completed   inference-perf exited 0, wrote its per-request report, every request and every session succeeded,
                and the requests recorded are as many as the sessions' events (none lost)
    incomplete  it ran to the end, but some requests or sessions failed, or requests were lost
    failed      it did not run to the end: a non-zero exit, a timeout, a server that died or restarted, no report

The counts come from inference-perf 0.7.0's per-request report (a list of requests; `error` not null is a failure:
{"error_type": "HTTP Error 500", "error_msg": ...}) and per-session report (a list of sessions: `success`, `error`,
`num_events`, the requests the session's graph holds). A failure's reason from the log is the exception's last line,
not the traceback's first.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional, TypeVar

from ..formats.run_record import RunRecord
from ..formats.run_folder import METRICS_FILE, PER_REQUEST_FILE, PER_SESSION_FILE, report_folders

if TYPE_CHECKING:
    from .server import LiveServer

__all__ = [
    "RunCounts",
    "cached_tokens_warning",
    "count_records",
    "judge_run",
    "last_error",
    "read_counts",
    "read_report",
    "request_failed",
    "session_failed",
]

MAX_ERRORS = 5
_ERROR_CHARS = 300
# aiohttp's names for a request that lost its connection (refused, reset, dropped): what a restart does to a run
CONNECTION_ERRORS = frozenset(
    {
        "ClientConnectorError",
        "ClientConnectionError",
        "ClientOSError",
        "ServerDisconnectedError",
        "ClientConnectionResetError",
        "ConnectionRefusedError",
        "ConnectionResetError",
    }
)


@dataclass
class RunCounts:
    """Requests and sessions of one run, as inference-perf reported them."""

    recorded: int = 0  # requests in the per-request report
    failed: int = 0  # of them, with an error
    expected: Optional[int] = None  # the sessions' events (None without a per-session report)
    sessions: int = 0
    sessions_failed: int = 0
    connection_failures: int = 0  # requests that failed for a lost connection
    errors: list[str] = field(default_factory=list)  # up to MAX_ERRORS distinct first errors
    session_report: bool = False

    @property
    def lost(self) -> int:
        return max(0, (self.expected or 0) - self.recorded)

    @classmethod
    def from_record(cls, record: RunRecord) -> "RunCounts":
        """The counts a run record (run.json, format 2) holds; zeros where it holds none."""
        requests, sessions = record.requests or {}, record.sessions or {}
        expected = requests.get("expected")
        return cls(
            recorded=int(requests.get("recorded") or 0),
            failed=int(requests.get("failed") or 0),
            expected=None if expected is None else int(expected),
            sessions=int(sessions.get("total") or 0),
            sessions_failed=int(sessions.get("failed") or 0),
        )

    def record(self) -> dict:
        """The run record's requests, sessions and errors fields."""
        return {
            "requests": {"expected": self.expected, "recorded": self.recorded, "failed": self.failed},
            "sessions": {"total": self.sessions, "failed": self.sessions_failed},
            "errors": list(self.errors),
        }

    def problems(self) -> str:
        """What keeps the run from being complete, in one line ("" when nothing)."""
        total = self.expected if self.expected is not None else self.recorded
        parts = []
        if self.failed:
            parts.append(f"{self.failed} of {total} requests failed")
        if self.lost:
            parts.append(f"{self.lost} of {total} requests not recorded")
        if self.sessions_failed:
            parts.append(f"{self.sessions_failed} of {self.sessions} sessions failed")
        return ", ".join(parts)


def request_failed(entry: dict) -> bool:
    """Whether inference-perf recorded a request as failed: its `error` is not null."""
    return entry.get("error") is not None


def session_failed(entry: dict) -> bool:
    """Whether a session failed: `success` false, or an `error` recorded (inference-perf 0.7.0 can write both an
    error and success true for one session: it is failed)."""
    return entry.get("success") is False or entry.get("error") is not None


def read_counts(folder: Path) -> Optional[RunCounts]:
    """The counts of the reports in the run folder `folder` (of all its shards together: the records merged, never
    the counts); None when there is no readable per-request report (in some shard)."""
    requests = read_report(folder, PER_REQUEST_FILE)
    if requests is None:
        return None
    return count_records(requests, read_report(folder, PER_SESSION_FILE))


def read_report(folder: Path, name: str) -> Optional[list[dict]]:
    """The entries of one of inference-perf's list reports (PER_REQUEST_FILE, PER_SESSION_FILE) of a run: every
    shard's, one after another, when it ran sharded; None when one of them is missing or not a list."""
    merged: list[dict] = []
    for where in report_folders(folder):
        entries = _read_list(where / name)
        if entries is None:
            return None
        merged += entries
    return merged


def count_records(requests: list[dict], sessions: Optional[list[dict]]) -> RunCounts:
    """The counts of inference-perf's per-request entries and per-session entries (None: no per-session report):
    the one way both the bakeoff and compare count failed and lost requests and failed sessions."""
    counts = RunCounts(recorded=len(requests))
    errors: list[str] = []
    # in the order the requests started: their errors are listed so
    for entry in sorted(requests, key=lambda e: _number(e.get("start_time"), float)):
        if not request_failed(entry):
            continue
        error = entry.get("error")
        counts.failed += 1
        kind = str((error or {}).get("error_type", "")) if isinstance(error, dict) else ""
        counts.connection_failures += kind in CONNECTION_ERRORS
        errors.append(_error_text(error))
    if sessions is not None:
        counts.session_report = True
        counts.sessions = len(sessions)
        counts.expected = sum(_number(s.get("num_events"), int) for s in sessions)
        for session in sorted(sessions, key=lambda s: str(s.get("session_id", ""))):
            if session_failed(session):
                counts.sessions_failed += 1
                if session.get("error") is not None:
                    errors.append(_error_text(session["error"]))
    counts.errors = list(dict.fromkeys(errors))[:MAX_ERRORS]
    return counts


_Number = TypeVar("_Number", int, float)


def _number(value: Any, kind: type[_Number]) -> _Number:
    """A count or a time inference-perf wrote, as `kind`; 0 where it wrote none or no number."""
    try:
        return kind(value or 0)
    except (TypeError, ValueError):
        return kind(0)


def judge_run(
    *,
    exit_code: int,
    counts: Optional[RunCounts],
    timeout_s: Optional[float],
    log: Path,
    died: bool = False,
    restarted: Optional[str] = None,
    who: str = "the server",
) -> tuple[str, Optional[str]]:
    """(status, reason): the reason is None for a completed run, one line otherwise. `restarted` says how a
    restart of the server during the run showed (None: it did not); `who` is what stopped answering, when `died`
    (behind a router: the router, or which replica)."""
    if died:
        return "failed", f"{who} stopped answering during the run"
    if restarted:
        return "failed", f"the server restarted during the run ({restarted})"
    if exit_code == 124 and timeout_s is not None:
        return "failed", f"stopped after --timeout {timeout_s:g} s"
    if exit_code != 0:
        return "failed", f"inference-perf exited with {exit_code}: {last_error(log)}"
    if counts is None:
        return "failed", "inference-perf wrote no per-request report"
    if not counts.session_report:
        return "failed", "inference-perf wrote no per-session report"
    problems = counts.problems()
    return ("incomplete", problems) if problems else ("completed", None)


def last_error(log: Path) -> str:
    """The error a log ends with: the exception line of its last traceback, else its last ERROR line, else its last
    line; with the log's name."""
    try:
        lines = Path(log).read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return "no log"
    tail = _exception_line(lines)
    if tail is None:
        errors = [line for line in lines if " - ERROR - " in line or line.startswith("Error")]
        tail = (errors or [line for line in lines if line.strip()] or ["no output"])[-1]
    return tail.split(" - ERROR - ")[-1].strip()[:_ERROR_CHARS] + f" (see {Path(log).name})"


def _exception_line(lines: list[str]) -> Optional[str]:
    """The `Type: message` line that ends the last traceback in `lines` (its frames are the indented lines)."""
    starts = [i for i, line in enumerate(lines) if line.startswith("Traceback (most recent call last)")]
    if not starts:
        return None
    for line in lines[starts[-1] + 1 :]:
        if line.strip() and not line[0].isspace():
            return line
    return None


def _error_text(error) -> str:
    if isinstance(error, dict):
        kind, message = error.get("error_type"), error.get("error_msg")
        text = ": ".join(str(part) for part in (kind, message) if part)
    else:
        text = str(error)
    return " ".join(text.split())[:_ERROR_CHARS]


def _read_list(path: Path) -> Optional[list[dict]]:
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(document, list):
        return None
    return [entry for entry in document if isinstance(entry, dict)]


def cached_tokens_warning(partial: Path, server: LiveServer) -> Optional[str]:
    """A server that hit its prefix cache but reported no cached tokens in any response was started without
    cached-token reporting: every hit ratio of the report would read 0. Say so while there is time to restart it."""
    try:
        entries = read_report(partial, PER_REQUEST_FILE)
        if entries is None:
            return None
        samples = [json.loads(line).get("metrics") or {} for line in (partial / METRICS_FILE).read_text().splitlines()]
    except (OSError, ValueError):
        return None
    reported = any(
        (
            (((e.get("info") or {}).get("response_metrics") or {}).get("server_usage") or {}).get(
                "prompt_tokens_details"
            )
            or {}
        ).get("cached_tokens")
        for e in entries
    )
    hits = [v for v in (server.engine.metric(m, "cache_hits") for m in samples) if v is not None]
    if not reported and len(hits) >= 2 and hits[-1] > hits[0]:
        return (
            f"the server hit its prefix cache but reported no cached tokens; restart it with "
            f"{server.engine.cache_report_flag} or every hit ratio reads 0"
        )
    return None
