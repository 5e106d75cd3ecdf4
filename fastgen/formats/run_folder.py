"""The layout of a bakeoff's run folders: the names of their files and folders, and the one walk that finds them.
The bakeoff writes this layout (bakeoff/runs.py places a run), compare and analyze read it; none of them spells a name
or walks the tree itself (tests/formats/test_run_folder.py holds them to it).

    <out>/<label>/<scenario>/<config>/repeat-<K>/     inference-perf's reports, and beside them:
        run.json                           what ran, against what, how it ended (RUN_FILE; formats/run_record.py)
        metrics.jsonl                      the server's /metrics, sampled while it ran (METRICS_FILE)
        inference-perf.log                 inference-perf's output (LOG_FILE)
        run-config.yml                     the config as run (RUN_CONFIG_FILE)
        shards/shard-<NN>/                 with --shards N, instead of the reports and the log above: each shard's
                                           config, inference-perf's reports and log (SHARDS_FOLDER); readers
                                           merge the shards' records into the run's (report_folders)

A capacity search (`fastgen bakeoff --capacity`) keeps each step as an ordinary bakeoff whose label is its load:

    <out>/capacity/<label>/<scenario>/<config>/        capacity.json (CAPACITY_FILE): the search's outcome, and
        sessions-<N>/<scenario>/<config>/repeat-<K>/   each step's runs at N sessions in flight (step_label)

A run is written into `repeat-<K>.partial/` and renamed over `repeat-<K>/` when it has ended (the finished run it
replaces moved aside to `repeat-<K>.old-<pid>/` for that moment), so a walk skips both: a reader never sees half a run.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Optional

__all__ = [
    "CAPACITY_FILE",
    "capacity_folder",
    "step_label",
    "INFERENCE_PERF_CONFIG",
    "LOG_FILE",
    "METRICS_FILE",
    "PER_REQUEST_FILE",
    "PER_SESSION_FILE",
    "RUN_CONFIG_FILE",
    "RUN_FILE",
    "SHARDS_FOLDER",
    "has_reports",
    "is_shard_folder",
    "partial_folder",
    "repeat_folder",
    "repeat_name",
    "repeat_of",
    "replaced_folder",
    "report_folders",
    "run_folders",
    "runs_at",
    "shard_folder",
]

RUN_FILE = "run.json"
METRICS_FILE = "metrics.jsonl"
LOG_FILE = "inference-perf.log"
RUN_CONFIG_FILE = "run-config.yml"
SHARDS_FOLDER = "shards"
CAPACITY_FOLDER = "capacity"
CAPACITY_FILE = "capacity.json"
# inference-perf 0.7.0's reports, and the config it writes beside them
PER_REQUEST_FILE = "per_request_lifecycle_metrics.json"
PER_SESSION_FILE = "per_session_lifecycle_metrics.json"
INFERENCE_PERF_CONFIG = "config.yaml"

_REPEAT = re.compile(r"repeat-(\d+)")
_SHARD = re.compile(r"shard-\d+")
_PARTIAL = ".partial"
_OLD = ".old-"


def repeat_name(repeat: int) -> str:
    """The folder name of repeat `repeat` (1-based) of a config."""
    return f"repeat-{repeat}"


def repeat_folder(config_folder: Path, repeat: int) -> Path:
    """The run folder of repeat `repeat` (1-based) of the config whose runs go to `config_folder`."""
    return Path(config_folder) / repeat_name(repeat)


def repeat_of(folder: Path) -> Optional[int]:
    """Which repeat `folder` is (its repeat-K name), None when it is not a repeat folder (an older layout's run)."""
    match = _REPEAT.fullmatch(Path(folder).name)
    return int(match.group(1)) if match else None


def capacity_folder(out_dir: Path, label: str, config: str) -> Path:
    """Where the capacity search of `config` (scenario3/c100_noisy) against LABEL's server keeps its steps."""
    return Path(out_dir) / CAPACITY_FOLDER / label / config


def step_label(load: int) -> str:
    """The label (folder) of a capacity step at `load` sessions in flight."""
    return f"sessions-{load}"


def shard_folder(index: int) -> str:
    """The folder of shard `index` (and the suffix of its report path): shard-00, shard-01, ..."""
    return f"shard-{index:02d}"


def is_shard_folder(folder: Path) -> bool:
    """Whether `folder` is one shard's folder of a sharded run (its reports are part of the run's, not a run)."""
    return Path(folder).parent.name == SHARDS_FOLDER and _SHARD.fullmatch(Path(folder).name) is not None


def report_folders(folder: Path) -> list[Path]:
    """Where a run's inference-perf reports are: its shards' folders, in shard order, when it ran sharded; else the
    run folder itself."""
    shards = Path(folder) / SHARDS_FOLDER
    found = sorted(p for p in shards.iterdir() if p.is_dir() and _SHARD.fullmatch(p.name)) if shards.is_dir() else []
    return found or [Path(folder)]


def has_reports(folder: Path) -> bool:
    """Whether the run in `folder` left a per-request report (its own, or its shards')."""
    return any((where / PER_REQUEST_FILE).is_file() for where in report_folders(folder))


def partial_folder(final: Path) -> Path:
    """Where the run that will be `final` is written until it has ended."""
    return final.with_name(final.name + _PARTIAL)


def replaced_folder(final: Path, tag: int) -> Path:
    """Where the finished run at `final` is moved aside while a new one takes its place (`tag`: the placing process)."""
    return final.with_name(f"{final.name}{_OLD}{tag}")


def run_folders(root: Path, *, with_reports: bool = False) -> list[Path]:
    """Every finished run folder under `root` (root too, when it is one; any layout), in path order: a folder with a
    run record, or with with_reports also one with a per-request report (a config run by hand), its own or its
    shards'. Unfinished (.partial) and replaced (.old-) folders, and what is below them, are not runs."""
    root = Path(root)
    found = {p.parent for p in root.rglob(RUN_FILE)}
    if with_reports:
        found |= {p.parent for p in root.rglob(PER_REQUEST_FILE)}
    # a shard's reports are its run's (shards/shard-NN/ below the run folder: read with it), not a run of their own
    folders = {f.parent.parent if is_shard_folder(f) else f for f in found}
    return sorted(f for f in folders if not _unfinished(f.relative_to(root)))


def runs_at(path: Path) -> list[Path]:
    """`path` when it is a run folder (holds a run record), else every finished run folder below it."""
    path = Path(path)
    return [path] if (path / RUN_FILE).is_file() else run_folders(path)


def _unfinished(relative: Path) -> bool:
    return any(part.endswith(_PARTIAL) or _OLD in part for part in relative.parts)
