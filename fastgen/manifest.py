"""The manifest at the root of an output: per-file size and content hash, the tokenizer, the spec, the arguments.

The content hash is XXH3-128: hashing is the one pass over every byte a worker makes besides the write itself, and
XXH3 runs at about 8 GB/s here against sha256's 1.5 GB/s (hashlib, SHA extensions), which saves about 0.7 s of a
default run with 2 workers. It is a checksum, not a signature, which is all a manifest of generated files needs;
the standard command-line check is `xxh128sum` (xxHash's own CLI, packaged as `xxhash` in Debian, Fedora and
Homebrew), whose hex digests are the manifest's. The manifest has no wall-clock field: the same arguments give the same bytes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import xxhash

from . import __version__
from .errors import OutputError

__all__ = ["MANIFEST_NAME", "HASH_NAME", "FileRecord", "record", "listed_record", "manifest_bytes", "read_manifest",
           "rewrite_files"]

MANIFEST_NAME = "manifest.json"
GENERATOR = "fastgen"
HASH_NAME = "xxh3_128"  # the key of each file's hash in the manifest, and the algorithm


@dataclass(frozen=True, order=True)
class FileRecord:
    path: str  # relative, with forward slashes
    size: int
    digest: str  # XXH3-128, hex, as xxh128sum prints it


def record(path: str, *chunks: bytes) -> FileRecord:
    """The record of a file whose bytes are the concatenation of chunks."""
    digest = xxhash.xxh3_128()
    for chunk in chunks:
        digest.update(chunk)
    return FileRecord(path, sum(len(c) for c in chunks), digest.hexdigest())


def listed_record(path: str, entry: dict, manifest: Path) -> FileRecord:
    """The record a manifest lists for path; a manifest from before XXH3 (sha256) is named as such."""
    if HASH_NAME not in entry:
        raise OutputError(f"{manifest} lists {path} without an {HASH_NAME} hash (written by fastgen before 0.2); "
                          f"regenerate it: the dataset with fastgen, a golden manifest with `make golden`")
    return FileRecord(path, entry.get("size"), entry[HASH_NAME])


def _files(files: list[FileRecord]) -> dict:
    return {f.path: {"size": f.size, HASH_NAME: f.digest} for f in sorted(files)}


def _dump(doc: dict) -> bytes:
    return (json.dumps(doc, indent=1, sort_keys=True, ensure_ascii=False) + "\n").encode()


def manifest_bytes(*, files: list[FileRecord], tokenizer: dict, spec: dict, arguments: dict) -> bytes:
    doc = {
        "generator": GENERATOR,
        "version": __version__,
        "arguments": arguments,
        "tokenizer": tokenizer,
        "spec": spec,
        "files": _files(files),
    }
    return _dump(doc)


def rewrite_files(folder: Path, doc: dict, files: list[FileRecord]) -> None:
    """Replace the file list of a manifest (atomically), keeping everything else it records."""
    temp = folder / (MANIFEST_NAME + ".part")
    temp.write_bytes(_dump({**doc, "files": _files(files)}))
    temp.replace(folder / MANIFEST_NAME)


def read_manifest(folder: Path, name: str = MANIFEST_NAME) -> dict:
    path = folder / name
    try:
        doc = json.loads(path.read_bytes())
    except FileNotFoundError:
        raise OutputError(f"{path} does not exist; is {folder} a fastgen output?") from None
    except ValueError as exc:
        raise OutputError(f"{path} does not parse as JSON ({exc}); regenerate the dataset") from exc
    if not isinstance(doc, dict) or doc.get("generator") != GENERATOR or not isinstance(doc.get("files"), dict):
        raise OutputError(f"{path} is not a fastgen manifest; regenerate the dataset")
    return doc
