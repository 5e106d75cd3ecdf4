"""Where the bakeoff places a run: written into its .partial folder, renamed over the finished one when it has ended,
and what an interrupted run left discarded. The folder's layout (its names, the walk that finds runs) is
formats/run_folder.py's.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Optional

from ..formats.run_folder import partial_folder, replaced_folder, run_folders
from ..formats.run_record import RunRecord, read_run
from ..interrupts import signals_held

__all__ = ["discard_partial", "place_run", "recorded_runs"]


def recorded_runs(label_folder: Path) -> list[tuple[Path, RunRecord]]:
    """Every finished run under a label's folder (any layout, any format), as (folder, run record), in path order;
    unfinished (.partial) and replaced (.old-) folders are not runs."""
    found = []
    for folder in run_folders(label_folder):
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
    old = replaced_folder(final, os.getpid())
    with signals_held():
        if final.exists():
            os.replace(final, old)
        os.replace(partial, final)
    shutil.rmtree(old, ignore_errors=True)
