"""Check a dataset's bytes against a manifest, and restore plain `.json` from `.json.zst` for inference-perf.

`verify` re-hashes every listed file with the manifest's hash (threads: xxhash and zstd release the GIL on large
buffers) and reports what is missing, extra, changed and truncated. A listed file found only in its other form
(`X.json.zst` for `X.json`, or the reverse) is compared by content, so a compressed dataset verifies against the
golden manifest of the plain one.

`unpack` either finishes or leaves the folder as it was, and a rerun after a kill finishes the job (unpack_tree).
"""

from __future__ import annotations

import os
import shutil
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, TypeVar

from .formats.compression import ZSTD_SUFFIX, CorruptTrace, declared_size, decompress
from .errors import OutputError
from .interrupts import signals_held
from .formats.manifest import (
    MANIFEST_NAME,
    FileRecord,
    human_size,
    listed_record,
    read_manifest,
    read_manifest_file,
    record,
    rewrite_files,
)
from .formats.rows import DATASET_SUFFIX
from .formats.writer import SessionWriter, part_path

__all__ = ["VerifyReport", "verify_tree", "unpack_tree"]

_T = TypeVar("_T")
_R = TypeVar("_R")
_UNCHANGED = "unpack changed nothing"
_BLOCK = 4096  # a restored file takes whole filesystem blocks


@dataclass
class VerifyReport:
    """Listed paths that are missing; paths on disk that are extra, changed, or truncated (smaller than listed)."""

    checked: int = 0
    missing: list[str] = field(default_factory=list)
    extra: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    truncated: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (self.missing or self.extra or self.changed or self.truncated)

    def summary(self, limit: int = 5) -> str:
        # The first line's "N missing, N extra, N changed" prefix is what scripts and tests look for: keep it.
        lines = [
            f"checked {self.checked} files: {len(self.missing)} missing, {len(self.extra)} extra, "
            f"{len(self.changed)} changed, {len(self.truncated)} truncated"
        ]
        for name, paths in (
            ("missing", self.missing),
            ("extra", self.extra),
            ("changed", self.changed),
            ("truncated", self.truncated),
        ):
            lines += [f"  {name}: {p}" for p in paths[:limit]]
            if len(paths) > limit:
                lines.append(f"  {name}: ... and {len(paths) - limit} more")
        lines += [_dataset_fix(p) for p in sorted(self.changed + self.truncated) if _is_dataset_file(p)]
        return "\n".join(lines)


def _is_dataset_file(path: str) -> bool:
    return path.removesuffix(ZSTD_SUFFIX).endswith(DATASET_SUFFIX) and "/" not in path


def _dataset_fix(path: str) -> str:
    # the configs read this file by default: say what to do about it, not only that it differs
    return (
        f"error: {path} is not the session-per-row file the manifest lists (the configs read it); regenerate the "
        f"dataset with fastgen, or write configs that read the trace directory instead (fastgen --source traces)"
    )


def _map(fn: Callable[[_T], _R], items: Iterable[_T], workers: int | None) -> list[_R]:
    """fn over items on threads, in order. If one raises (or Ctrl-C comes), the items not started are dropped
    instead of run to the end by the pool's exit."""
    pool = ThreadPoolExecutor(max_workers=workers or os.cpu_count() or 1)
    try:
        return list(pool.map(fn, items))
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _dataset_folder(root: Path, usage: str) -> None:
    """Refuse a root that is not a folder, before reading root/manifest.json says something less clear."""
    if root.is_dir():
        return
    if root.exists():
        raise OutputError(f"{root} is a file, not a dataset folder; give the folder that holds {MANIFEST_NAME}{usage}")
    raise OutputError(f"{root} does not exist; give the dataset folder that holds {MANIFEST_NAME}")


def _holds(path: Path, expected: FileRecord) -> bool:
    """Whether the file at path has exactly the bytes expected records."""
    try:
        return record(expected.path, path.read_bytes()) == expected
    except OSError:
        return False


# verify


def _verdict(path: Path, expected: FileRecord, packed: bool) -> str:
    """ "ok", "changed" or "truncated": path's bytes, decompressed first if packed. A file smaller than its record
    that stops mid-document is truncated; a `.json.zst` compared by content is truncated when its frame is cut short, and changed when it
    decompresses whole (its checksum holds) to other bytes, however many."""
    try:
        data = path.read_bytes()
        if packed:
            data = decompress(data, path)
    except CorruptTrace as exc:
        return "truncated" if exc.truncated else "changed"
    except OSError:
        return "changed"  # listed a moment ago, unreadable now
    got = record(expected.path, data)
    if got == expected:
        return "ok"
    # Smaller, and not ending as a JSON document ends: cut short. A whole file with other content (another seed,
    # other arguments) ends with its closing brace and is changed, whatever its size.
    cut = got.size < expected.size and not data.rstrip().endswith(b"}")
    return "truncated" if cut and not packed else "changed"


def _find(rel: str, listed: dict[str, FileRecord], on_disk: set[str]) -> tuple[str, FileRecord, bool] | None:
    """Where a listed file is on disk: (path, the record its bytes must have, whether to decompress them first).
    Itself; else its other form, compared by content (one the manifest does not list itself)."""
    if rel in on_disk:
        return rel, listed[rel], False
    if rel.endswith(ZSTD_SUFFIX):
        plain, expected = rel[: -len(ZSTD_SUFFIX)], listed[rel].plain()
        if expected is not None and plain in on_disk and plain not in listed:
            return plain, expected, False
        return None
    packed = rel + ZSTD_SUFFIX
    if packed in on_disk and packed not in listed:
        return packed, listed[rel], True
    return None


def verify_tree(root: Path, *, manifest: Path | None = None, workers: int | None = None) -> VerifyReport:
    """Compare the files under root with a manifest (root's own, or another one such as a golden manifest)."""
    _dataset_folder(root, ", or pass a manifest file as --manifest FILE")
    if manifest is None:
        source, doc = root / MANIFEST_NAME, read_manifest(root)
    else:
        source, doc = manifest, read_manifest_file(manifest)
    listed = {rel: listed_record(rel, entry, source) for rel, entry in sorted(doc["files"].items())}
    on_disk = {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()} - {MANIFEST_NAME}
    found = {rel: _find(rel, listed, on_disk) for rel in listed}
    checks = [where for where in found.values() if where is not None]
    report = VerifyReport(checked=len(listed))
    report.missing = [rel for rel, where in found.items() if where is None]
    report.extra = sorted(on_disk - {path for path, _, _ in checks})
    verdicts = _map(lambda check: _verdict(root / check[0], check[1], check[2]), checks, workers)
    report.changed = sorted(path for (path, _, _), v in zip(checks, verdicts) if v == "changed")
    report.truncated = sorted(path for (path, _, _), v in zip(checks, verdicts) if v == "truncated")
    return report


# unpack


@dataclass(frozen=True)
class _Restore:
    packed: FileRecord  # the listed .json.zst
    plain: FileRecord  # the .json it restores to
    present: bool  # that .json is already in place with these bytes (a killed unpack renamed it in)


def _check_space(root: Path, packed: list[FileRecord]) -> None:
    """Refuse before writing when the restored files cannot fit beside the `.json.zst` (kept until the end).
    Sizes from the manifest's content records, else from the frame headers; a file already restored (same size)
    needs nothing."""
    need = 0
    for rec in packed:
        plain = rec.plain()
        size = plain.size if plain is not None else declared_size(root / rec.path) or rec.size
        target = root / rec.path[: -len(ZSTD_SUFFIX)]
        if not (target.is_file() and target.stat().st_size == size):
            need += -(-size // _BLOCK) * _BLOCK
    free = shutil.disk_usage(root).free
    if need > free:
        raise OutputError(
            f"unpack needs about {human_size(need)}, {human_size(free)} free in {root}; free space, or copy the "
            f"dataset to a disk with room and unpack it there ({_UNCHANGED})"
        )


def _packed_bytes(root: Path, rec: FileRecord) -> bytes:
    """A listed `.json.zst`, checked against its record and decompressed."""
    path = root / rec.path
    fix = f"{_UNCHANGED}: restore the file or regenerate the dataset, then rerun"
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise OutputError(f"{path} is missing; {fix}") from None
    except OSError as exc:
        raise OutputError(
            f"cannot read {path} ({exc.strerror or exc}); {_UNCHANGED}: check its permissions, then rerun"
        ) from None
    got = record(rec.path, data)
    if got != rec:
        what = (
            f"is truncated ({got.size} of {rec.size} bytes)"
            if got.size < rec.size
            else "does not match the manifest (other bytes)"
        )
        raise OutputError(f"{path} {what}; {fix}")
    try:
        return decompress(data, path)
    except CorruptTrace as exc:
        raise OutputError(f"{path} is truncated or corrupt ({exc.detail}); {fix}") from None


def _check_packed(root: Path, rec: FileRecord) -> _Restore:
    """What restoring rec means, checked before anything is written."""
    known = rec.plain()
    if known is not None and not (root / rec.path).exists() and _holds(root / known.path, known):
        return _Restore(rec, known, present=True)  # restored already (by hand: `zstd -d --rm`), manifest not updated
    plain = record(rec.path[: -len(ZSTD_SUFFIX)], _packed_bytes(root, rec))
    if known is not None and known != plain:
        raise OutputError(
            f"{root / rec.path} decompresses to other bytes than its manifest records; "
            f"{_UNCHANGED}: regenerate the dataset"
        )
    target = root / plain.path
    if not target.exists():
        return _Restore(rec, plain, present=False)
    if _holds(target, plain):
        return _Restore(rec, plain, present=True)
    raise OutputError(
        f"{target} is in the way: it is not what {rec.path} holds; {_UNCHANGED}: move it out of {root}, then rerun"
    )


def _leftover(root: Path, rec: FileRecord, listed: set[str]) -> Path | None:
    """The `.json.zst` of a restored, listed `.json` that a killed unpack did not remove, if it holds that file's
    bytes and the `.json` is in place (so nothing is lost); anything else is not unpack's to remove."""
    packed = root / (rec.path + ZSTD_SUFFIX)
    if rec.path.endswith(ZSTD_SUFFIX) or rec.path + ZSTD_SUFFIX in listed or not packed.is_file():
        return None
    try:
        same = record(rec.path, decompress(packed.read_bytes(), packed)) == rec
    except (OSError, CorruptTrace):
        return None
    return packed if same and _holds(root / rec.path, rec) else None


def _remove_all(paths: Iterable[Path]) -> None:
    for path in paths:
        try:
            path.unlink(missing_ok=True)
        except OSError:
            pass  # best effort: a temporary name is fastgen's own and the next unpack removes it


def _write_parts(root: Path, todo: list[_Restore]) -> None:
    """Every `.json` under its temporary name, checked against its record; on any failure or Ctrl-C, none."""
    writer = SessionWriter(root, None)  # the same temporary names and one-line errors as generation
    try:
        for item in todo:
            _, got = writer.stage(item.plain.path, [_packed_bytes(root, item.packed)])
            if got != item.plain:
                raise OutputError(
                    f"{root / item.plain.path} was restored with other bytes than "
                    f"{item.packed.path} held a moment ago; {_UNCHANGED}: rerun"
                )
    except BaseException:
        _remove_all(part_path(root / item.plain.path) for item in todo)
        raise


def _put_in_place(
    root: Path, doc: dict, listed: list[FileRecord], restores: list[_Restore], leftovers: list[Path]
) -> None:
    """The short final phase: rename the `.json` in, rewrite the manifest, remove the `.json.zst`. A kill here
    leaves a state the next unpack finishes (kept `.json`, leftover `.json.zst`)."""
    todo = [item for item in restores if not item.present]
    restored = {item.packed.path: item.plain for item in restores}
    with signals_held():
        try:
            for item in todo:
                os.replace(part_path(root / item.plain.path), root / item.plain.path)
            if restores:
                rewrite_files(root, doc, [restored.get(rec.path, rec) for rec in listed])
            for path in [*(root / item.packed.path for item in restores), *leftovers]:
                path.unlink(missing_ok=True)
        except OSError as exc:
            _remove_all(part_path(root / item.plain.path) for item in todo)
            raise OutputError(
                f"unpack stopped while putting the files in place ({exc.strerror or exc}); run "
                f"`fastgen unpack {root}` again to finish"
            ) from None


def unpack_tree(root: Path, *, workers: int | None = None) -> int:
    """Replace every listed `.json.zst` by its `.json` (not the dataset files, rows.py); returns how many were restored (0: none was listed).

    First, before writing anything, the free space and every `.json.zst` are checked (there, the listed bytes,
    decompresses). Then every `.json` is written under its temporary name, removed again on any failure or Ctrl-C,
    so the folder is as it was. Last, with Ctrl-C and SIGTERM held back, they are renamed in, the manifest is
    rewritten with their records, and the `.json.zst` removed. A rerun after a kill (-9) finishes the job: it keeps
    the `.json` already in place with the right bytes, removes the temporary files and the `.json.zst` of files the
    manifest already lists as restored.
    """
    _dataset_folder(root, " (fastgen unpack DIR)")
    doc = read_manifest(root)
    listed = [listed_record(rel, entry, root / MANIFEST_NAME) for rel, entry in sorted(doc["files"].items())]
    # a dataset file stays compressed: `datasets` reads `.jsonl.zst` as it is, and the configs name that file
    packed = [rec for rec in listed if rec.path.endswith(ZSTD_SUFFIX) and not _is_dataset_file(rec.path)]
    _check_space(root, packed)
    restores = _map(lambda rec: _check_packed(root, rec), packed, workers)
    names = {rec.path for rec in listed}
    leftovers = [p for p in _map(lambda rec: _leftover(root, rec, names), listed, workers) if p is not None]
    # A killed run's temporary files: the `.json` being written, the manifest being rewritten.
    _remove_all([*(part_path(root / item.plain.path) for item in restores), part_path(root / MANIFEST_NAME)])
    _write_parts(root, [item for item in restores if not item.present])
    _put_in_place(root, doc, listed, restores, leftovers)
    return len(restores)
