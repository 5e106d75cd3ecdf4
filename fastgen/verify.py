"""Check a dataset's bytes against a manifest, and restore plain `.json` from `.json.zst` for inference-perf.

`verify` re-hashes every listed file with the manifest's hash (threads: xxhash releases the GIL on large buffers) and
reports what is missing, extra and changed. `unpack` writes each `.json` beside its `.json.zst` via a temporary name,
then removes the `.zst` and rewrites the manifest, so a rerun after an interruption finishes the job.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from .compression import ZSTD_SUFFIX, read_trace_bytes
from .errors import OutputError
from .manifest import (
    MANIFEST_NAME,
    FileRecord,
    listed_record,
    read_manifest,
    record,
    rewrite_files,
)
from .writer import SessionWriter

__all__ = ["VerifyReport", "verify_tree", "unpack_tree"]


@dataclass
class VerifyReport:
    checked: int = 0
    missing: list[str] = field(default_factory=list)
    extra: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (self.missing or self.extra or self.changed)

    def summary(self, limit: int = 5) -> str:
        lines = [f"checked {self.checked} files: {len(self.missing)} missing, {len(self.extra)} extra, "
                 f"{len(self.changed)} changed"]
        for name, paths in (("missing", self.missing), ("extra", self.extra), ("changed", self.changed)):
            lines += [f"  {name}: {p}" for p in paths[:limit]]
            if len(paths) > limit:
                lines.append(f"  {name}: ... and {len(paths) - limit} more")
        return "\n".join(lines)


def _matches(path: Path, listed: FileRecord) -> bool:
    try:
        data = path.read_bytes()
    except OSError:
        return False
    return record(listed.path, data) == listed


def verify_tree(root: Path, *, manifest: Path | None = None, workers: int | None = None) -> VerifyReport:
    """Compare the files under root with a manifest (root's own, or another one such as a golden manifest)."""
    source = manifest or root / MANIFEST_NAME
    listed = {rel: listed_record(rel, entry, source)
              for rel, entry in read_manifest(source.parent, name=source.name)["files"].items()}
    if not root.is_dir():
        raise OutputError(f"{root} is not a folder; give the dataset folder that holds {MANIFEST_NAME}")
    on_disk = {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()} - {MANIFEST_NAME}
    report = VerifyReport(checked=len(listed))
    report.missing = sorted(set(listed) - on_disk)
    report.extra = sorted(on_disk - set(listed))
    present = sorted(set(listed) & on_disk)
    with ThreadPoolExecutor(max_workers=workers or os.cpu_count() or 1) as pool:
        ok = list(pool.map(lambda rel: _matches(root / rel, listed[rel]), present))
    report.changed = [rel for rel, good in zip(present, ok) if not good]
    return report


def unpack_tree(root: Path) -> int:
    """Replace every listed `.json.zst` by its `.json`; returns how many files were restored."""
    doc = read_manifest(root)
    records: list[FileRecord] = []
    writer = SessionWriter(root, None)  # the same temporary name, rename and one-line error as generation
    restored = 0
    for rel, entry in sorted(doc["files"].items()):
        listed = listed_record(rel, entry, root / MANIFEST_NAME)
        if not rel.endswith(ZSTD_SUFFIX):
            records.append(listed)
            continue
        plain = rel[: -len(ZSTD_SUFFIX)]
        packed = root / rel
        if not _matches(packed, listed):
            raise OutputError(f"{packed} is missing or does not match the manifest; regenerate the dataset")
        records.append(writer.write(plain, [read_trace_bytes(packed)]))
        packed.unlink()
        restored += 1
    rewrite_files(root, doc, records)
    return restored
