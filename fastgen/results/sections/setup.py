"""The setup of each side, from what its runs recorded (run.json's identity): what was measured, on what, how."""

from __future__ import annotations

from collections import Counter
from typing import Optional

from ..report import Pair, Section, Side, Table

SCENARIO = None  # every scenario


def _values(side: Side, *keys: str) -> str:
    found = []
    for run in side.runs.values():
        found += [v for v in run.identity_values(*keys) if v not in found]
    return ", ".join(f"{v:,}" if isinstance(v, int) and not isinstance(v, bool) else str(v) for v in found) or "-"


def _engine(side: Side) -> str:
    engines = _values(side, "server", "engine")
    if engines == "-":
        engines = ", ".join(side.engines) or "-"
    version = _values(side, "server", "version")
    return engines if version == "-" else f"{engines} {version}"


def _dataset(side: Side) -> str:
    found = []
    for run in side.runs.values():
        found += [v[:12] for v in run.identity_values("dataset_sha256") if v[:12] not in found]
    return ", ".join(found) or "-"


def _router(side: Side) -> str:
    """The routing policy and how many replicas served behind it (fleet.py); `-` for a server without a router."""
    found = []
    for run in side.runs.values():
        for router in run.identity_values("router"):
            shown = f"{router.get('policy')}, {len(router.get('replica_urls') or [])} replicas"
            found += [shown] if shown not in found else []
    return "; ".join(found) or "-"


def _repeats(side: Side) -> str:
    counts = sorted({len(run.repeats) for run in side.runs.values()})
    return "-" if not counts else str(counts[0]) if len(counts) == 1 else f"{counts[0]}-{counts[-1]}"


def _statuses(side: Side) -> str:
    counts = Counter(run.status for run in side.runs.values())
    return ", ".join(f"{counts[s]} {s}" for s in sorted(counts))


def _reset(side: Side) -> str:
    repeats = [r for run in side.runs.values() for r in run.repeats]
    verified = sum(r.reset.get("verified") is True for r in repeats)
    refuted = sum(r.reset.get("verified") is False for r in repeats)
    done = sorted({str(r.reset.get("done")) for r in repeats if r.reset.get("done")})
    if not done:
        return "not recorded"
    return f"{'; '.join(done)}: verified in {verified} of {len(repeats)} runs" + (
        f", seen to fail in {refuted}" if refuted else ""
    )


ROWS = (
    ("engine and version", _engine),
    ("served model", lambda s: _values(s, "server", "model")),
    ("server URL", lambda s: _values(s, "server", "url")),
    ("KV capacity (tokens)", lambda s: _values(s, "server", "kv_capacity_tokens")),
    ("block size (tokens)", lambda s: _values(s, "server", "block_size")),
    ("GPUs", lambda s: _values(s, "server", "gpus")),
    ("router (policy, replicas)", _router),
    ("dataset (manifest sha256)", _dataset),
    ("workload", lambda s: _values(s, "workload")),
    ("repeats per config", _repeats),
    ("outputs", lambda s: _values(s, "outputs")),
    ("tool-call max_tokens", lambda s: _values(s, "tool_call_max_tokens")),
    ("tool_choice", lambda s: _values(s, "tool_choice")),
    ("cache reset", _reset),
    ("configs", _statuses),
    ("ceilings", lambda s: s.ceilings.describe() if s.ceilings else "none (no --analysis)"),
)


def build(pair: Pair) -> Optional[Section]:
    table = Table(
        "What each side ran",
        ["", f"A: {pair.a.label}", f"B: {pair.b.label}"],
        note="From each run's record (run.json); `-` where the runs did not record it (older bakeoffs, "
        "configs run by hand). Outputs: `recorded` replays the dataset's answers, so both engines get the "
        "same prompts; `live` feeds each engine its own. Tool-call max_tokens: `recorded` keeps the recorded "
        "length, `floor` lets inference-perf raise it to 4096.",
    )
    table.rows = [[label, value(pair.a), value(pair.b)] for label, value in ROWS]
    return Section("setup", "Setup", tables=[table])
