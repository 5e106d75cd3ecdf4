"""Byte equality across variants: a speed comparison means nothing unless every variant wrote the same files.

Only the trace files count (the scenario folders): fastgen also writes a tokenizer copy, a manifest and configs that
the native generator never made. fastgen's own output is checked through its manifest (XXH3-128 of the bytes it
wrote; the file listing on disk must match it); the native output and the floor's are hashed here, from disk, with
the manifest's own hash function (manifest.record).
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from fastgen.formats.compression import ZSTD_SUFFIX, read_trace_bytes
from fastgen.generator.scenarios import layouts
from fastgen.formats.manifest import HASH_NAME, read_manifest, record

__all__ = ["session_paths", "hash_files", "manifest_sessions", "compare", "zstd_sample", "zstd_content_sizes"]

_SHOWN = 3  # mismatches named in a report; the count says the rest


def session_paths(root: Path) -> list[str]:
    """Relative paths of every trace file under root's scenario folders, sorted."""
    return sorted(
        p.relative_to(root).as_posix()
        for name in layouts()
        if (root / name).is_dir()
        for p in (root / name).iterdir()
        if p.is_file()
    )


def _hash(path: Path) -> tuple[int, str]:
    rec = record(path.name, path.read_bytes())
    return rec.size, rec.digest


def hash_files(root: Path, rels: list[str]) -> dict[str, tuple[int, str]]:
    """rel -> (size, hash). Threads suffice: reads and xxhash on large buffers release the GIL."""
    with ThreadPoolExecutor(os.cpu_count() or 1) as pool:
        return dict(zip(rels, pool.map(lambda rel: _hash(root / rel), rels)))


def manifest_sessions(root: Path) -> tuple[dict[str, tuple[int, str]], list[str]]:
    """fastgen's records of its trace files (rel -> (size, hash)), and problems if disk and manifest disagree."""
    files = read_manifest(root)["files"]
    records = {rel: (f["size"], f[HASH_NAME]) for rel, f in files.items() if rel.split("/", 1)[0] in layouts()}
    on_disk = session_paths(root)
    problems = (
        [] if sorted(records) == on_disk else [f"manifest lists {len(records)} trace files, disk holds {len(on_disk)}"]
    )
    return records, problems


def compare(reference: dict[str, str], got: dict[str, str]) -> list[str]:
    """Problems (empty when equal): paths missing, extra, or with other bytes. Maps are rel -> hash."""
    missing = sorted(set(reference) - set(got))
    extra = sorted(set(got) - set(reference))
    differ = sorted(rel for rel in set(reference) & set(got) if reference[rel] != got[rel])
    return [
        f"{len(items)} {what} (e.g. {', '.join(items[:_SHOWN])})"
        for what, items in (("missing", missing), ("extra", extra), ("with other bytes", differ))
        if items
    ]


def zstd_content_sizes(root: Path, rels: list[str]) -> int:
    """Uncompressed bytes of .json.zst files, from each frame header (fastgen writes one frame per file, with its
    content size; zstd_sample checks that on a sample). Reads ~18 bytes a file instead of decompressing GBs."""
    import zstandard

    total = 0
    for rel in rels:
        with open(root / rel, "rb") as f:
            total += zstandard.frame_content_size(f.read(18))
    return total


def zstd_sample(root: Path, reference: dict[str, str], n: int) -> tuple[int, list[str]]:
    """Decompress n trace files spread evenly over the sorted paths and compare with the reference bytes; also
    check each is one frame whose header size is the whole content. Returns (files checked, problems)."""
    import zstandard

    rels = sorted(reference)
    picks = sorted({rels[i * (len(rels) - 1) // max(n - 1, 1)] for i in range(min(n, len(rels)))}) if rels else []
    problems = []
    for rel in picks:
        path = root / (rel + ZSTD_SUFFIX)
        if not path.exists():
            problems.append(f"{rel + ZSTD_SUFFIX} missing")
            continue
        data = read_trace_bytes(path)
        with open(path, "rb") as f:
            declared = zstandard.frame_content_size(f.read(18))
        if record(rel, data).digest != reference[rel]:
            problems.append(f"{rel + ZSTD_SUFFIX} decompresses to other bytes")
        elif declared != len(data):
            problems.append(f"{rel + ZSTD_SUFFIX} is not one frame holding the whole file")
    return len(picks), problems
