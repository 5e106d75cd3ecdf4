"""The manifest at the root of an output: per-file size and content hash, the tokenizer, the workload, the arguments.

The content hash is XXH3-128: hashing is the one pass over every byte a worker makes besides the write itself, and
XXH3 runs at about 8 GB/s here against sha256's 1.5 GB/s (hashlib, SHA extensions), which saves about 0.7 s of a
default run with 2 workers. It is a checksum, not a signature, which is all a manifest of generated files needs;
the standard command-line check is `xxh128sum` (xxHash's own CLI, packaged as `xxhash` in Debian, Fedora and
Homebrew), whose hex digests are the manifest's. The manifest has no wall-clock field: the same arguments give the same bytes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

import xxhash

from ..version import __version__
from .atomic import write_atomically
from .compression import ZSTD_SUFFIX
from ..errors import OutputError

__all__ = [
    "MANIFEST_NAME",
    "HASH_NAME",
    "FileRecord",
    "record",
    "listed_record",
    "manifest_bytes",
    "read_manifest",
    "read_manifest_file",
    "rewrite_files",
    "human_size",
]

MANIFEST_NAME = "manifest.json"
GENERATOR = "fastgen"
HASH_NAME = "xxh3_128"  # the key of each file's hash in the manifest, and the algorithm
CONTENT = "content"  # a compressed file's entry: the size and hash of its decompressed bytes


@dataclass(frozen=True, order=True)
class FileRecord:
    """A file's size and hash. A compressed file's record may also carry its decompressed content's (`content`):
    verify compares it with a plain copy, and unpack checks what it restores against it. Records compare by the
    bytes of the file itself: two records of the same bytes are equal whether or not one knows its content."""

    path: str  # relative, with forward slashes
    size: int
    digest: str  # XXH3-128, hex, as xxh128sum prints it
    content: tuple[int, str] | None = field(default=None, compare=False)  # (size, digest) decompressed

    def plain(self) -> FileRecord | None:
        """The record of the plain file this one holds: itself if it is not compressed, None if unknown."""
        if not self.path.endswith(ZSTD_SUFFIX):
            return self
        if self.content is None:
            return None
        return FileRecord(self.path[: -len(ZSTD_SUFFIX)], *self.content)


def human_size(n: int) -> str:
    """A byte count for messages: GB from 0.1 GB up, MB below (decimal units, as disks are sold)."""
    return f"{n / 1e9:.1f} GB" if n >= 1e8 else f"{n / 1e6:.1f} MB"


def record(path: str, *chunks: bytes) -> FileRecord:
    """The record of a file whose bytes are the concatenation of chunks."""
    digest = xxhash.xxh3_128()
    for chunk in chunks:
        digest.update(chunk)
    return FileRecord(path, sum(len(c) for c in chunks), digest.hexdigest())


def listed_record(path: str, entry: dict, manifest: Path) -> FileRecord:
    """The record a manifest lists for path; a manifest from before XXH3 (sha256) is named as such."""
    if HASH_NAME not in entry:
        raise OutputError(
            f"{manifest} lists {path} without an {HASH_NAME} hash (written by fastgen before 0.2); "
            f"regenerate it: the dataset with fastgen, a golden manifest with `make golden`"
        )
    size = entry.get("size")
    if not isinstance(size, int):  # else verify compared a size of None and failed with a TypeError
        raise OutputError(f"{manifest} lists {path} without its size (size: {size!r}); regenerate it")
    return FileRecord(path, size, entry[HASH_NAME], _listed_content(path, entry, manifest))


def _listed_content(path: str, entry: dict, manifest: Path) -> tuple[int, str] | None:
    content = entry.get(CONTENT)
    if content is None:
        return None
    if not (
        isinstance(content, dict) and isinstance(content.get("size"), int) and isinstance(content.get(HASH_NAME), str)
    ):
        raise OutputError(
            f"{manifest} lists {path} with a malformed {CONTENT!r} record; regenerate it: the dataset "
            f"with fastgen, a golden manifest with `make golden`"
        )
    return content["size"], content[HASH_NAME]


def _entry(f: FileRecord) -> dict:
    entry = {"size": f.size, HASH_NAME: f.digest}
    if f.content is not None:  # only compressed files: a plain file's entry stays as before (the golden manifest)
        entry[CONTENT] = {"size": f.content[0], HASH_NAME: f.content[1]}
    return entry


def _files(files: list[FileRecord]) -> dict:
    return {f.path: _entry(f) for f in sorted(files)}


def _dump(doc: dict) -> bytes:
    return (json.dumps(doc, indent=1, sort_keys=True, ensure_ascii=False) + "\n").encode()


def manifest_bytes(*, files: list[FileRecord], tokenizer: dict, workload: dict, arguments: dict) -> bytes:
    """The manifest: `workload` is the effective workload document (Spec.to_dict), which loads back as a workload."""
    doc = {
        "generator": GENERATOR,
        "version": __version__,
        "arguments": arguments,
        "tokenizer": tokenizer,
        "workload": workload,
        "files": _files(files),
    }
    return _dump(doc)


def rewrite_files(folder: Path, doc: dict, files: list[FileRecord]) -> None:
    """Replace the file list of a manifest (atomically), keeping everything else it records."""
    # under the name unpack clears when a kill left one behind
    write_atomically(
        folder / MANIFEST_NAME, _dump({**doc, "files": _files(files)}), temp=folder / (MANIFEST_NAME + ".part")
    )


def _document(path: Path) -> dict:
    """The manifest at path. Raises OSError as reading does, ValueError saying why it is not a fastgen manifest."""
    try:
        doc = json.loads(path.read_bytes())
    except UnicodeDecodeError:
        raise ValueError("not JSON: not UTF-8 text") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"not JSON: {exc}") from None
    if not isinstance(doc, dict) or doc.get("generator") != GENERATOR or not isinstance(doc.get("files"), dict):
        raise ValueError(f'JSON without "generator": "{GENERATOR}" and a "files" object')
    return doc


def _read_explained(
    path: Path,
    explanations: Sequence[tuple[type[Exception] | tuple[type[Exception], ...], Callable[[str], str]]],
) -> dict:
    """The manifest at path, or an OutputError saying why not: the message of the first explanation whose exception
    type the failure is, given the reason in words. First match wins, so a subclass (FileNotFoundError) goes before
    its base (OSError); every caller's list ends with OSError and ValueError, all that _document raises."""
    try:
        return _document(path)
    except (OSError, ValueError) as exc:
        # an OSError's str() repeats the path the message names already; its strerror is the OS's words alone
        reason = str(exc.strerror or exc) if isinstance(exc, OSError) else str(exc)
        explain = next(explain for kind, explain in explanations if isinstance(exc, kind))
        raise OutputError(explain(reason)) from None


def read_manifest(folder: Path, name: str = MANIFEST_NAME) -> dict:
    """A dataset folder's own manifest. Every failure is an OutputError (outdir.py takes one to mean "not a
    fastgen output"); a manifest that is there but broken means the dataset is, so the fix is to regenerate it."""
    path = folder / name
    return _read_explained(
        path,
        [
            (FileNotFoundError, lambda _: f"{path} does not exist; is {folder} a fastgen output?"),
            (
                NotADirectoryError,
                lambda _: f"{folder} is a file, not a dataset folder; give the folder that holds {name}",
            ),
            (OSError, lambda reason: f"cannot read {path} ({reason}); check its permissions"),
            (ValueError, lambda reason: f"{path} is not a fastgen manifest ({reason}); regenerate the dataset"),
        ],
    )


def read_manifest_file(path: Path) -> dict:
    """A manifest named on the command line (verify --manifest): its errors are about that file, not the dataset."""
    fix = f"give a dataset's {MANIFEST_NAME} or a golden manifest (e.g. golden/default.manifest.json)"
    return _read_explained(
        path,
        [
            ((FileNotFoundError, NotADirectoryError), lambda _: f"manifest {path} does not exist; {fix}"),
            (IsADirectoryError, lambda _: f"manifest {path} is a folder; {fix}"),
            (OSError, lambda reason: f"cannot read manifest {path} ({reason}); {fix}"),
            (ValueError, lambda reason: f"{path} is not a fastgen manifest ({reason}); {fix}"),
        ],
    )
