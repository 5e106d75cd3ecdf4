"""Helpers the analysis tests share: hand-made planned requests over block hashes, an analysis result, and a run
record through a router (for --server-from)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import numpy as np

from _support.results import router_identity

from fastgen.analysis.schedule import PlannedRequest
from fastgen.formats.run_record import RunRecord, write_run

BS = 16


def hashes(*keys: int) -> np.ndarray:
    return np.asarray(keys, dtype=np.uint64)


def request(event, blocks, *, preds=(), wait_ms=0, extra=5, output=10, label="1") -> PlannedRequest:
    return PlannedRequest(event, tuple(preds), wait_ms, hashes(*blocks), len(blocks) * BS + extra, output, label)


def target_result(name, prompt, cached_infinite, cached_capacity=None, sweep=(), by_label=None):
    from fastgen.analysis import TargetResult

    return TargetResult(
        name,
        "t",
        1,
        requests=1,
        prompt_tokens=prompt,
        cached_infinite=cached_infinite,
        cached_capacity=cached_capacity,
        sweep=list(sweep),
        by_label=by_label or {},
    )


def fleet_record(folder: Path, policy: str, *capacities: Optional[int]) -> Path:
    """A run through a router, as the bakeoff records it: the server's capacity the replicas' summed, each replica's
    own in the identity's router (bakeoff/fleet.py)."""
    server = {"engine": "vllm", "kv_capacity_tokens": sum(c for c in capacities if c), "block_size": 32}
    folder.mkdir(parents=True)
    identity = {"server": server, "router": router_identity(policy, *capacities)}
    write_run(folder, RunRecord(config="scenario1/c10", repeat=1, status="completed", identity=identity))
    return folder
