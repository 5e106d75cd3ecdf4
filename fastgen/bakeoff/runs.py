"""The run folder of one repeat of one config against one server: what the bakeoff writes there, and how it is placed.

    <out>/<label>/<scenario>/<config>/repeat-<K>/     inference-perf's reports, and beside them:
        run.json                           what ran, against what, how it ended (formats/run_record.py)
        metrics.jsonl                      the server's /metrics, sampled while it ran (METRICS_FILE)
        inference-perf.log                 inference-perf's output (LOG_FILE)
        run-config.yml                     the config as run (RUN_CONFIG_FILE)
        shards/shard-<NN>/                 with --shards N, instead of the reports and the log above: each shard's
                                           config, inference-perf's reports and log (SHARDS_FOLDER); readers
                                           merge the shards' records into the run's (report_folders)

A run is written into `repeat-<K>.partial/` and renamed over `repeat-<K>/` when it has ended, so an interrupted run never
replaces a finished one and a reader never sees half a run.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path
from typing import Optional

from ..formats.run_record import RUN_FILE, RunRecord, read_run
from ..interrupts import signals_held

__all__ = [
    "LOG_FILE",
    "METRICS_FILE",
    "RUN_CONFIG_FILE",
    "SHARDS_FOLDER",
    "discard_partial",
    "partial_folder",
    "place_run",
    "recorded_runs",
    "report_folders",
    "is_shard_folder",
    "repeat_folder",
]

METRICS_FILE = "metrics.jsonl"
LOG_FILE = "inference-perf.log"
RUN_CONFIG_FILE = "run-config.yml"
SHARDS_FOLDER = "shards"
_SHARD = re.compile(r"shard-\d+")  # shards.py's shard_folder
_PARTIAL = ".partial"
_OLD = ".old-"


def repeat_folder(config_folder: Path, repeat: int) -> Path:
    """The run folder of repeat `repeat` (1-based) of the config whose runs go to `config_folder`."""
    return Path(config_folder) / f"repeat-{repeat}"


def report_folders(folder: Path) -> list[Path]:
    """Where a run's inference-perf reports are: its shards' folders, in shard order, when it ran sharded; else the
    run folder itself."""
    shards = Path(folder) / SHARDS_FOLDER
    found = sorted(p for p in shards.iterdir() if p.is_dir() and _SHARD.fullmatch(p.name)) if shards.is_dir() else []
    return found or [Path(folder)]


def is_shard_folder(folder: Path) -> bool:
    """Whether `folder` is one shard's folder of a sharded run (its reports are part of the run's, not a run)."""
    return Path(folder).parent.name == SHARDS_FOLDER and _SHARD.fullmatch(Path(folder).name) is not None


def partial_folder(final: Path) -> Path:
    return final.with_name(final.name + _PARTIAL)


def recorded_runs(label_folder: Path) -> list[tuple[Path, RunRecord]]:
    """Every finished run under a label's folder (any layout, any format), as (folder, run record), in path order;
    unfinished (.partial) and replaced (.old-) folders are not runs."""
    found = []
    for path in sorted(Path(label_folder).rglob(RUN_FILE)):
        folder = path.parent
        if any(part.endswith(_PARTIAL) or _OLD in part for part in folder.relative_to(label_folder).parts):
            continue
        record = read_run(folder)
        if record is not None:
            found.append((folder, record))
    return found


def discard_partial(final: Path, *, prune_to: Optional[Path] = None) -> None:
    """Remove what an unfinished run left (a .partial folder is the bakeoff's own, never a user's); with prune_to,
    also the folders above it that are left empty, up to (not including) prune_to."""
    shutil.rmtree(partial_folder(final), ignore_errors=True)
    if prune_to is None:
        return
    folder = Path(final).parent
    while folder != Path(prune_to) and Path(prune_to) in folder.parents:
        try:
            folder.rmdir()  # only when empty
        except OSError:
            return
        folder = folder.parent


def place_run(final: Path) -> None:
    """Move `<final>.partial` to `final`, replacing an earlier run of the same config only once the new one is whole."""
    partial = partial_folder(final)
    old = final.with_name(f"{final.name}{_OLD}{os.getpid()}")
    with signals_held():
        if final.exists():
            os.replace(final, old)
        os.replace(partial, final)
    shutil.rmtree(old, ignore_errors=True)
