"""The output folder: what fastgen may write into, and how a finished staging folder takes its place.

A run writes into a fresh staging folder beside the output (`.NAME.fastgen-XXXX`, marked as fastgen's own), so an
interrupted or failed run never touches the output. At the end the staging folder replaces the previous output
whole. fastgen never deletes a file it did not write: a folder with files its manifest does not list is refused,
and with --force those files stay, and only the files the previous manifest lists are removed.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from .errors import OutputError
from .manifest import MANIFEST_NAME, read_manifest

__all__ = ["check_output_dir", "make_staging", "place", "STAGING_MARK"]

STAGING_MARK = ".fastgen-staging"


def _listed(path: Path) -> set[str]:
    try:
        return set(read_manifest(path)["files"]) | {MANIFEST_NAME}
    except OutputError:
        return set()  # not a fastgen output: everything in it is foreign, even empty folders


def _foreign(path: Path) -> list[str]:
    listed = _listed(path)
    return sorted(p.relative_to(path).as_posix() for p in path.rglob("*")
                  if not (p.is_dir() and listed) and p.relative_to(path).as_posix() not in listed)


def check_output_dir(path: Path, *, force: bool = False) -> None:
    """Refuse a folder that holds anything fastgen did not write, unless force."""
    if path.exists() and not path.is_dir():
        raise OutputError(f"output {path} exists and is not a folder; choose another --output-dir")
    if force or not path.is_dir():
        return
    foreign = _foreign(path)
    if foreign:
        raise OutputError(f"output folder {path} holds files fastgen did not write (e.g. {foreign[0]}); move them "
                          f"out, choose an empty --output-dir, or pass --force to write beside them")


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _marked_folder(out: Path, kind: str) -> Path:
    folder = Path(tempfile.mkdtemp(prefix=f".{out.name}.fastgen-{kind}", dir=out.parent))
    folder.chmod(0o777 & ~_umask())  # mkdtemp makes it private; the dataset should not be
    (folder / STAGING_MARK).touch()
    return folder


def make_staging(out: Path) -> Path:
    """A fresh marked staging folder beside out, after removing what killed runs left there."""
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        for stale in out.parent.glob(f".{out.name}.fastgen-*"):
            if (stale / STAGING_MARK).is_file():  # only folders fastgen made and marked as its own
                shutil.rmtree(stale, ignore_errors=True)
        return _marked_folder(out, "")
    except OSError as exc:
        raise OutputError(f"cannot write into {out.parent} ({exc.strerror}); choose a writable --output-dir") from exc


def place(staging: Path, out: Path) -> None:
    """Put a finished staging folder in place of out: a new folder is renamed into place, an empty one (maybe the
    working directory) is filled, a previous fastgen output is replaced whole, foreign files (--force) stay."""
    (staging / STAGING_MARK).unlink()
    if not out.exists():
        os.replace(staging, out)
    elif not any(out.iterdir()) or _foreign(out):
        _merge(staging, out)
    else:
        _swap(staging, out)


def _swap(staging: Path, out: Path) -> None:
    old = _marked_folder(out, "old-")
    try:
        os.replace(out, old / "previous")
    except OSError:
        shutil.rmtree(old)  # e.g. --output-dir . cannot be renamed: leave no swap folder behind
        raise
    try:
        os.replace(staging, out)
    except OSError:
        os.replace(old / "previous", out)  # put the previous output back
        shutil.rmtree(old)
        raise
    shutil.rmtree(old, ignore_errors=True)


def _merge(staging: Path, out: Path) -> None:
    """Remove what the previous manifest lists, move the new files in, the manifest last."""
    listed = _listed(out)
    files = sorted(p for p in staging.rglob("*") if p.is_file() and p.name != MANIFEST_NAME)
    clash = [p.relative_to(staging).as_posix() for p in files
             if (out / p.relative_to(staging)).exists() and p.relative_to(staging).as_posix() not in listed]
    if clash:
        raise OutputError(f"{out / clash[0]} is not fastgen's and would be overwritten; move it out of {out}")
    for rel in sorted(listed):
        (out / rel).unlink(missing_ok=True)
    for path in [*files, staging / MANIFEST_NAME]:
        target = out / path.relative_to(staging)
        target.parent.mkdir(parents=True, exist_ok=True)
        os.replace(path, target)
    shutil.rmtree(staging)
