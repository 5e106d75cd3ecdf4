"""The ceilings of recorded runs: `fastgen analyze`, run by `fastgen compare` for one side at what its runs recorded
(the engine, its KV capacity, block or page size and scheduler settings; the configs and the trace folder they
replayed), as `fastgen analyze --server-from` those runs would, so that no
side needs an --analysis file written by hand. Where it cannot, one line says why (the trace folder or the configs
are not on this machine, the runs recorded more than one server, the validate extra is missing).

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
from .results.ceilings import Ceilings, ceilings_of
from .results.runs import ConfigRun

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

    def describe(self) -> str:
        capacity = "unbounded" if self.capacity_tokens is None else f"--kv-cache-tokens {self.capacity_tokens}"
        block = "" if self.block_size is None else f" --block-size {self.block_size}"
        return f"fastgen analyze {self.traces} --engine {self.engine}{block} {capacity}, run by compare"


def _one(values: list, what: str) -> tuple[Optional[object], Optional[str]]:
    """The one value the runs recorded (None: none), or why there are several (`what`: their plural)."""
    found = sorted({v for v in values if v is not None}, key=str)
    if len(found) > 1:
        return None, f"its runs recorded {len(found)} {what} ({', '.join(map(str, found))})"
    return (found[0] if found else None), None


def recorded_setup(runs: dict[str, ConfigRun]) -> tuple[Optional[RecordedSetup], Optional[str]]:
    """(the setup every run of a side recorded, or None and why there is no single one)."""
    servers = [r.server for run in runs.values() for r in run.repeats]
    engine, why = _one([s.get("engine") or None for s in servers] + [run.engine for run in runs.values()], "engines")
    if why or engine is None:
        return None, why or "its runs recorded no engine"
    capacity, why = _one([s.get("kv_capacity_tokens") for s in servers], "KV capacities")
    block, why_block = _one([s.get("block_size") for s in servers], "block sizes")
    scheduler, why_scheduler = _one(
        [orjson.dumps(s.get("scheduler"), option=orjson.OPT_SORT_KEYS).decode() for s in servers], "scheduler settings"
    )
    why_block = why_block or why_scheduler
    if why or why_block:
        return None, why or why_block
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
    setup = RecordedSetup(str(engine), capacity, block, traces, config_dir, tuple(sorted(runs)), str(scheduler))  # type: ignore[arg-type]
    return setup, None


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
    from .analysis import AnalysisOptions, analyze, config_targets
    from .analysis.report import analysis_document
    from .analysis.rules import ENGINE_RULES
    from .analysis.serving import settings_from_record
    from .extras import require_extra

    if setup.engine not in ENGINE_RULES:
        return None, f"analyze has no cache rules for the engine {setup.engine!r}"
    try:
        require_extra("validate", "fastgen compare's ceilings")
        targets = [t for t in config_targets(setup.config_dir, setup.traces) if t.name in setup.configs]
        if not targets:
            return None, f"none of its configs is in {setup.config_dir}"
        settings, _, _ = settings_from_record(setup.engine, orjson.loads(setup.scheduler))
        options = AnalysisOptions(
            block_size=setup.block_size or ENGINE_RULES[setup.engine].default_block_size,
            capacity_tokens=setup.capacity_tokens,
            engine=setup.engine,
            settings=settings,
        )
        reading, results = analyze(targets, setup.traces / "tokenizer", options)
    except FastgenError as exc:
        return None, str(exc)
    return ceilings_of(analysis_document(reading, options, results), setup.describe()), None
