"""A run folder's record (run.json): what ran, against what, how it ended. One writer, one reader.

Format (`format`, RUN_FORMAT): 1, files without the key (the URL and engine at the top, no repeats, no counts); 2,
repeat-K folders, status incomplete, counts, identity, a verified reset. The reader reads every format up to
RUN_FORMAT, filling what an older one did not record with defaults (one shard, nothing known), and refuses a newer one
in one line: a record this fastgen cannot read in full must not be read as less than it says. The writer always
writes RUN_FORMAT, with the same keys as the dicts before it (sorted, indented), so today's tools read its bytes.

Typed here: the top-level fields. Left as dicts, free-form because their shapes belong to their writers and typing
them would copy those writers' shapes here: `identity` (bakeoff/identity.py: the server, the run config, its hashes),
`reset` (bakeoff/reset.py: done, verified, how), `requests` and `sessions` (bakeoff/status.py RunCounts.record),
`fleet` (bakeoff/fleet.py: each replica's figures).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Optional

from ..errors import OutputError
from .atomic import write_atomically
from .run_folder import RUN_FILE

__all__ = ["RUN_FILE", "RUN_FORMAT", "RouterFleet", "RunRecord", "read_run", "router_fleet", "write_run"]

RUN_FORMAT = 2  # 2: repeat-K folders, status incomplete, counts, identity, a verified reset

# written only when set: a key the dicts before the record left out when they had nothing to say
_ONLY_WHEN_SET = ("fleet", "url", "engine")


@dataclass(frozen=True)
class RunRecord:
    """One run.json. None (or {}, []) where the run did not record a field, or the file's format had no such field."""

    format: int = RUN_FORMAT  # the file's format as read (1 when it had no key); the writer writes RUN_FORMAT
    config: Optional[str] = None  # the config's name, "scenario1/c10"
    repeat: Optional[int] = None
    repeats: Optional[int] = None
    label: Optional[str] = None
    fastgen: Optional[str] = None  # the version of fastgen that ran it
    scrape_interval_s: Optional[float] = None
    config_dir: Optional[str] = None  # the config folder the bakeoff ran it from (for compare's own analyze)
    shards: int = 1  # inference-perf processes the run was split over; 1 before --shards
    identity: dict = field(default_factory=dict)  # free-form (module doc): what makes two runs the same run
    reset: Optional[dict] = None  # free-form: {"done", "verified", "how"}; a bare bool before format 2 becomes "done"
    started: Optional[float] = None  # epoch s
    ended: Optional[float] = None  # epoch s: which repeat is the newest
    seconds: Optional[float] = None
    exit_code: Optional[int] = None
    metrics_samples: Optional[int] = None
    metrics_errors: Optional[int] = None
    status: Optional[str] = None  # completed, incomplete, failed
    reason: Optional[str] = None
    warning: Optional[str] = None
    requests: Optional[dict] = None  # free-form: {"expected", "recorded", "failed"}; None: not recorded
    sessions: Optional[dict] = None  # free-form: {"total", "failed"}; None: not recorded
    errors: list[str] = field(default_factory=list)  # up to MAX_ERRORS distinct first errors
    fleet: Optional[dict] = None  # free-form: each replica's figures behind a router; None: no router
    url: Optional[str] = None  # format 1 only: the server's URL at the top (format 2: identity's server)
    engine: Optional[str] = None  # format 1 only: the engine at the top

    @property
    def server(self) -> Optional[dict]:
        """The server it ran against as identity records it (format 2), else format 1's URL and engine; None
        where the record names none."""
        server = self.identity.get("server")
        if isinstance(server, dict):
            return server
        if self.url or self.engine:
            return {"url": self.url, "engine": self.engine}
        return None

    def to_json(self) -> str:
        """The file's text: format RUN_FORMAT, sorted keys, indented, as the bakeoff has always written it."""
        data = {**asdict(self), "format": RUN_FORMAT}
        for key in _ONLY_WHEN_SET:
            if data[key] is None:
                del data[key]
        return json.dumps(data, indent=2, sort_keys=True) + "\n"


@dataclass(frozen=True)
class RouterFleet:
    """A run's fleet as its identity's router recorded it (bakeoff/identity.py, bakeoff/fleet.py)."""

    policy: str  # the router's policy as recorded ("None" when it recorded none)
    replicas: int  # how many replicas behind it: its replica URLs, else its replicas' servers
    capacities: tuple[Any, ...]  # each replica server's KV capacity as recorded (None: not recorded); () no servers


def router_fleet(identity: dict) -> Optional[RouterFleet]:
    """The fleet behind the router a run's identity records; None when it ran without one."""
    router = identity.get("router")
    if not isinstance(router, dict):
        return None
    servers = router.get("replicas") or []
    return RouterFleet(
        policy=str(router.get("policy")),
        replicas=len(router.get("replica_urls") or servers),
        capacities=tuple(s.get("kv_capacity_tokens") if isinstance(s, dict) else None for s in servers),
    )


def write_run(folder: Path, record: RunRecord) -> None:
    """`record` into `folder`'s run.json, atomically: a reader sees the old file or the new one, never half."""
    write_atomically(Path(folder) / RUN_FILE, record.to_json())


def read_run(folder: Path) -> Optional[RunRecord]:
    """The record of the run folder `folder`; None when there is none, or it is not a JSON object. OutputError (one
    line) when its format is newer than this fastgen reads."""
    path = Path(folder) / RUN_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return from_dict(data, path) if isinstance(data, dict) else None


def from_dict(data: dict, where: Path | str = RUN_FILE) -> RunRecord:
    """The record a run.json's object holds: fields of the wrong type read as not recorded (an older or hand-edited
    file must not stop compare); OutputError for a format newer than RUN_FORMAT."""
    version = data.get("format", 1)
    if not isinstance(version, int) or version > RUN_FORMAT:
        raise OutputError(
            f"{where} is run.json format {version}; this fastgen reads up to format {RUN_FORMAT}: upgrade fastgen"
        )
    reset = data.get("reset")
    return RunRecord(
        format=version,
        config=_of(data, "config", str),
        repeat=_of(data, "repeat", int),
        repeats=_of(data, "repeats", int),
        label=_of(data, "label", str),
        fastgen=_of(data, "fastgen", str),
        scrape_interval_s=_number(data, "scrape_interval_s"),
        config_dir=_of(data, "config_dir", str),
        shards=_of(data, "shards", int) or 1,
        identity=_of(data, "identity", dict) or {},
        reset=reset if isinstance(reset, dict) or reset is None else {"done": reset, "verified": None, "how": None},
        started=_number(data, "started"),
        ended=_number(data, "ended"),
        seconds=_number(data, "seconds"),
        exit_code=_of(data, "exit_code", int),
        metrics_samples=_of(data, "metrics_samples", int),
        metrics_errors=_of(data, "metrics_errors", int),
        status=_of(data, "status", str),
        reason=_of(data, "reason", str),
        warning=_of(data, "warning", str),
        requests=_of(data, "requests", dict),
        sessions=_of(data, "sessions", dict),
        errors=[str(e) for e in _of(data, "errors", list) or []],
        fleet=_of(data, "fleet", dict),
        url=_of(data, "url", str),
        engine=_of(data, "engine", str),
    )


def _of(data: dict, key: str, kind: type) -> Any:
    value = data.get(key)
    if kind is int and isinstance(value, bool):
        return None  # a bool is an int to isinstance, never a count
    return value if isinstance(value, kind) else None


def _number(data: dict, key: str) -> Optional[float]:
    value = data.get(key)
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None
