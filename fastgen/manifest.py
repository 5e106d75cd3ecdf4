"""The manifest at the root of an output: per-file size and content hash, the tokenizer, the spec, the arguments.

sha256 was chosen so anyone can check a file with the standard `sha256sum`, and because hashlib's sha256 runs at
well over a GB/s on CPUs with SHA extensions. The manifest has no wall-clock field: the same arguments give the
same manifest bytes.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from . import __version__
from .errors import OutputError

__all__ = ["MANIFEST_NAME", "FileRecord", "record", "manifest_bytes", "read_manifest", "rewrite_files"]

MANIFEST_NAME = "manifest.json"
GENERATOR = "fastgen"


@dataclass(frozen=True, order=True)
class FileRecord:
    path: str  # relative, with forward slashes
    size: int
    sha256: str


def record(path: str, *chunks: bytes) -> FileRecord:
    """The record of a file whose bytes are the concatenation of chunks."""
    digest = hashlib.sha256()
    for chunk in chunks:
        digest.update(chunk)
    return FileRecord(path, sum(len(c) for c in chunks), digest.hexdigest())


def _files(files: list[FileRecord]) -> dict:
    return {f.path: {"size": f.size, "sha256": f.sha256} for f in sorted(files)}


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
