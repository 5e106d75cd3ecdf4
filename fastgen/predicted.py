"""The ceilings of recorded runs: `fastgen analyze`, run by `fastgen compare` for one side at what its runs recorded
(the engine, its KV capacity, block or page size and scheduler settings; the configs and the trace folder they
replayed), as `fastgen analyze --server-from` those runs would, so that no
side needs an --analysis file written by hand. Where it cannot, one line says why (the trace folder or the configs
are not on this machine, the runs recorded more than one server, the validate extra is missing).

A side whose runs went through a router (the run identity's `router`: its policy and each replica's server) gets the
fleet's ceilings, as `fastgen analyze --replicas N --router POLICY --kv-cache-tokens PER_REPLICA` predicts them: each
replica its own cache, requests routed as the policy routes them. One cache of the replicas' summed capacity would
share prefixes no two replicas share, a ceiling no fleet reaches. A router analyze cannot model (a policy it has no
rules for, replicas of unequal capacity) gets one line saying so, not one cache's ceiling.

It calls the analysis library's public entry points only (config_targets, analyze, analysis_document), with the
options `fastgen analyze --server-from RUNS` would give it (a run that recorded no scheduler settings: the engine's
defaults, as there). Two sides that recorded the
same setup share one analysis.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import orjson

from .errors import FastgenError
from .formats.run_record import router_fleet
from .results.ceilings import Ceilings, ceilings_of
from .results.runs import ConfigRun, Repeat

__all__ = ["RecordedSetup", "recorded_ceilings", "recorded_setup"]


@dataclass(frozen=True)
class RecordedSetup:
    """What one side's runs recorded that an analysis needs."""

    engine: str
    capacity_tokens: Optional[int]
    block_size: Optional[int]
    traces: Path  # the dataset's trace folder (holding tokenizer/ and the trace directories)
    config_dir: Path
    configs: tuple[str, ...]
    scheduler: str = "null"  # the scheduler settings the runs recorded (identity.server.scheduler), as JSON
    replicas: int = 1  # behind a router: how many; capacity_tokens is then each one's
    router: Optional[str] = None  # the router's policy (None: no router)

    def describe(self) -> str:
        capacity = "unbounded" if self.capacity_tokens is None else f"--kv-cache-tokens {self.capacity_tokens}"
        block = "" if self.block_size is None else f" --block-size {self.block_size}"
        fleet = "" if self.replicas == 1 else f" --replicas {self.replicas} --router {self.router}"
        return f"fastgen analyze {self.traces} --engine {self.engine}{block} {capacity}{fleet}, run by compare"


def _one(values: list, what: str) -> tuple[Optional[object], Optional[str]]:
    """The one value the runs recorded (None: none), or why there are several (`what`: their plural)."""
    found = sorted({v for v in values if v is not None}, key=str)
    if len(found) > 1:
        return None, f"its runs recorded {len(found)} {what} ({', '.join(map(str, found))})"
    return (found[0] if found else None), None


def recorded_setup(runs: dict[str, ConfigRun]) -> tuple[Optional[RecordedSetup], Optional[str]]:
    """(the setup every run of a side recorded, or None and why there is no single one)."""
    repeats = [r for run in runs.values() for r in run.repeats]
    servers = [r.server for r in repeats]
    engine, why = _one([s.get("engine") or None for s in servers] + [run.engine for run in runs.values()], "engines")
    if why or engine is None:
        return None, why or "its runs recorded no engine"
    fleet, why = _fleet(repeats)
    block, why_block = _one([s.get("block_size") for s in servers], "block sizes")
    scheduler, why_scheduler = _one(
        [orjson.dumps(s.get("scheduler"), option=orjson.OPT_SORT_KEYS).decode() for s in servers], "scheduler settings"
    )
    why = why or why_block or why_scheduler
    if why or fleet is None:
        return None, why
    folders = {Path(run.trace_directory).parent for run in runs.values() if run.trace_directory}
    if len(folders) != 1:
        return None, (
            "its runs recorded no trace folder (run-config.yml)"
            if not folders
            else "its runs replayed more than one dataset folder"
        )
    traces = folders.pop()
    if not (traces / "tokenizer").is_dir():
        return None, f"the trace folder its runs replayed, {traces}, is not here (or has no tokenizer/)"
    recorded = {run.config_dir for run in runs.values() if run.config_dir}
    config_dir = Path(recorded.pop()) if len(recorded) == 1 else traces.parent / "configs"
    if not (config_dir / "manifest.json").is_file():
        return None, f"the configs its runs ran, {config_dir}, are not here"
    replicas, router, capacity = fleet
    configs = tuple(sorted(runs))
    setup = RecordedSetup(str(engine), capacity, block, traces, config_dir, configs, str(scheduler), replicas, router)  # type: ignore[arg-type]
    return setup, None


def _fleet(repeats: list[Repeat]) -> tuple[Optional[tuple[int, Optional[str], Optional[int]]], Optional[str]]:
    """((replicas, the router's policy or None, each replica's KV capacity), None) as the runs recorded them (the
    identity's router: its policy and each replica's server; a run without one: one server), or (None, why)."""
    routers = [router_fleet(r.identity) for r in repeats]
    fleets = {(router.policy, router.replicas) if router else None for router in routers}
    if len(fleets) > 1:
        named = sorted("no router" if f is None else f"{f[1]} replicas behind {f[0]}" for f in fleets)
        return None, f"its runs went through more than one fleet ({', '.join(named)})"
    fleet = fleets.pop() if fleets else None
    if fleet is None:
        capacity, why = _one([r.server.get("kv_capacity_tokens") for r in repeats], "KV capacities")
        return (None, why) if why else ((1, None, capacity), None)  # type: ignore[return-value]
    policy, replicas = fleet
    if replicas < 1:
        return None, f"its runs went through a router ({policy}) without recording the replicas behind it"
    # a router that recorded no replicas' servers leaves the capacity unknown
    each = [capacity for router in routers if router for capacity in router.capacities or (None,)]
    capacity, why = _one(each, "KV capacities")
    if why:
        return None, why.replace("its runs", f"its {replicas} replicas") + "; analyze models replicas of one capacity"
    # a replica whose capacity is not known leaves the fleet's unknown: unbounded only, as for one server
    return (replicas, policy, None if None in each else capacity), None  # type: ignore[return-value]


_DONE: dict[RecordedSetup, tuple[Optional[Ceilings], Optional[str]]] = {}


def recorded_ceilings(label: str, runs: dict[str, ConfigRun]) -> tuple[Optional[Ceilings], Optional[str]]:
    """A side's ceilings, analyze run at what its runs recorded, or None and the one line that says why not."""
    setup, why = recorded_setup(runs)
    if setup is None:
        return None, why
    if setup not in _DONE:
        _DONE[setup] = _analyze(setup)
    return _DONE[setup]


def _analyze(setup: RecordedSetup) -> tuple[Optional[Ceilings], Optional[str]]:
    from .analysis import analyze, config_targets
    from .analysis.report import analysis_document
    from .analysis.routing import POLICIES
    from .analysis.rules import ENGINE_RULES
    from .extras import require_extra

    if setup.engine not in ENGINE_RULES:
        return None, f"analyze has no cache rules for the engine {setup.engine!r}"
    if setup.replicas > 1 and setup.router not in POLICIES:
        return None, (
            f"its runs went through a router with the policy {setup.router!r}, which analyze cannot model (it models "
            f"{', '.join(POLICIES)}); one cache's ceiling would not be its {setup.replicas} replicas'"
        )
    try:
        require_extra("validate", "fastgen compare's ceilings")
        targets = [t for t in config_targets(setup.config_dir, setup.traces) if t.name in setup.configs]
        if not targets:
            return None, f"none of its configs is in {setup.config_dir}"
        options = analysis_options(setup)
        reading, results = analyze(targets, setup.traces / "tokenizer", options)
    except FastgenError as exc:
        return None, str(exc)
    return ceilings_of(analysis_document(reading, options, results), setup.describe()), None


def analysis_options(setup: RecordedSetup):
    """The AnalysisOptions `fastgen analyze` is given for this setup: its engine's rules and recorded scheduler
    settings, its block size, and its fleet (replicas, router policy, each replica's capacity)."""
    from .analysis import AnalysisOptions
    from .analysis.rules import ENGINE_RULES
    from .analysis.serving import settings_from_record

    settings, _, _ = settings_from_record(setup.engine, orjson.loads(setup.scheduler))
    return AnalysisOptions(
        block_size=setup.block_size or ENGINE_RULES[setup.engine].default_block_size,
        capacity_tokens=setup.capacity_tokens,
        engine=setup.engine,
        settings=settings,
        replicas=setup.replicas,
        router=(setup.router if setup.replicas > 1 else None) or "round_robin",  # one replica: every policy is one
    )
