"""Processes and folders: start one measured variant, give each a clean slate, own the scratch folder.

Every variant writes GBs into the page cache; the kernel writes them back to disk later, and that writeback (and
the dirty-page throttling it brings) would land on whichever variant runs next. So before each variant the
previous output is deleted and `sync` waits for what is still dirty.

Then the bench waits `--settle` seconds, because on a virtual machine what a write costs also depends on how long
ago the memory it lands in was freed. A guest that reports free pages to its host (virtio-balloon free page
reporting) hands freed memory back a few seconds after it is freed, and the host must fault it in again on the next
write: on the 2-core development VM, writing 2.8 GB as fresh files took 3 s of kernel time into memory freed moments
before and 10 s into memory freed 10 s or more before. Every variant (the floor too) gets the same state:
memory freed `--settle` seconds before, the state a user's run meets.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

__all__ = ["REPO", "BenchError", "scratch_root", "clean_slate", "run_variant"]

REPO = Path(__file__).resolve().parent.parent
# Far above any real run (the full bench is minutes); only a hung variant hits it.
_TIMEOUT_S = 3600


class BenchError(Exception):
    """A variant failed or produced something unexpected; the message says which and why."""


@contextmanager
def scratch_root(parent: Path | None):
    """A fresh folder for every output of this run, on the repo's filesystem by default (REPO/.bench-scratch, which
    git ignores), so fastgen and the floor write to the disk the dataset normally goes to. Made inside --scratch,
    never --scratch itself, so removing it at the end can never take anything the bench did not write."""
    parent = (parent or REPO / ".bench-scratch").resolve()
    made_parent = not parent.exists()
    parent.mkdir(parents=True, exist_ok=True)
    root = Path(tempfile.mkdtemp(prefix="run-", dir=parent))
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)
        if made_parent:
            try:
                parent.rmdir()  # only if empty: another run may be using it
            except OSError:
                pass


def clean_slate(*previous: Path, settle: float = 0.0) -> float:
    """Delete earlier outputs, sync, then wait `settle` seconds; returns how long the sync took (how much writeback
    was still pending)."""
    for path in previous:
        shutil.rmtree(path, ignore_errors=True)
    t = time.perf_counter()
    os.sync()
    sync_s = time.perf_counter() - t
    time.sleep(settle)
    return sync_s


def run_variant(kind: str, params: dict, jobs: Path, name: str) -> dict:
    """Run one variant in a fresh `python -m native_bench.runner` process; return its result plus process_s, the
    wall time of the whole process (interpreter start, imports, work, exit), timed from here."""
    job, result = jobs / f"{name}.job.json", jobs / f"{name}.result.json"
    job.write_text(json.dumps({"kind": kind, "params": params, "result": str(result)}))
    t = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "native_bench.runner", str(job)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=_TIMEOUT_S,
    )
    process_s = time.perf_counter() - t
    if proc.returncode != 0 or not result.exists():
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-5:]
        raise BenchError(f"variant {name} exited {proc.returncode}: " + (" | ".join(tail) or "no output"))
    return {**json.loads(result.read_text()), "process_s": process_s}
