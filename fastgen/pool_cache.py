"""Prepared content pools kept on disk between runs, so a later run on the same machine skips building them.

A pool is a pure function of fastgen's code, the tokenizer, the seed and its kind, and its entry is keyed by a hash
of all four: the code as the bytes of every module of the package (an edited checkout never reads a pool an older
version made), the tokenizer as the sha256 of its tokenizer.json. Entries live in $XDG_CACHE_HOME/fastgen/pools
(~/.cache/fastgen/pools by default), one JSON file per pool (the pool's units, fillers and their counts: data, never
code), written under a temporary name and renamed. An entry that is missing, unreadable or not what it should be is
built again; a folder that cannot be written is skipped: the cache only ever saves time, it never changes a byte of
the output. The folder keeps the most recently written entries (_KEEP) and deletes older ones of its own.
`fastgen --no-cache` neither reads nor writes it.
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path
from typing import Mapping

import orjson
import xxhash

from .content.compose import Pool
from .version import __version__

__all__ = ["PoolCache", "cache_folder", "code_fingerprint"]

_SUFFIX = ".pool.json"
_KEEP = 128  # entries (about 0.5 MB each on average): nine pools for each of 14 tokenizer-and-seed pairs
_FIELDS = ("units", "counts", "fillers", "filler_counts")


def cache_folder(env: Mapping[str, str] = os.environ) -> Path | None:
    """Where entries live: $XDG_CACHE_HOME/fastgen/pools, or ~/.cache/fastgen/pools where that is unset or not an
    absolute path (as the XDG base directory specification says to treat it); None without a home folder either."""
    base = env.get("XDG_CACHE_HOME", "")
    if os.path.isabs(base):
        return Path(base) / "fastgen" / "pools"
    try:
        return Path.home() / ".cache" / "fastgen" / "pools"
    except RuntimeError:  # no HOME and no password entry (a bare container user): no cache, nothing else changes
        return None


@lru_cache(maxsize=1)
def code_fingerprint() -> str:
    """A hash of fastgen's version and every module of the package, path and bytes, in path order."""
    package = Path(__file__).resolve().parent
    digest = xxhash.xxh3_128(__version__.encode())
    for path in sorted(package.rglob("*.py")):
        digest.update(path.relative_to(package).as_posix().encode() + b"\0")
        digest.update(path.read_bytes())
    return digest.hexdigest()


class PoolCache:
    """The entries of one run: its tokenizer (by the sha256 of tokenizer.json) and seed."""

    def __init__(self, folder: Path, tokenizer_sha256: str, seed: int):
        self.folder = folder
        self._prefix = xxhash.xxh3_128(f"{code_fingerprint()}|{tokenizer_sha256}|{seed}".encode()).hexdigest()

    def path(self, kind: str) -> Path:
        return self.folder / f"{self._prefix}-{kind}{_SUFFIX}"

    def load(self, kind: str) -> Pool | None:
        """The stored pool of `kind`, or None where there is none that reads back whole."""
        try:
            doc = orjson.loads(self.path(kind).read_bytes())
        except (OSError, orjson.JSONDecodeError):
            return None
        if not isinstance(doc, dict) or doc.get("kind") != kind or not all(
                isinstance(doc.get(name), list) for name in _FIELDS):
            return None
        units, counts, fillers, filler_counts = (doc[name] for name in _FIELDS)
        if not (units and fillers and len(units) == len(counts) and len(fillers) == len(filler_counts)
                and all(isinstance(t, str) for t in units + fillers)
                and all(type(c) is int for c in counts + filler_counts)):
            return None
        return Pool(units, counts, fillers, filler_counts)

    def store(self, kind: str, pool: Pool) -> None:
        """Write the entry of `kind` (all or nothing), then trim the folder; a failure only means no entry."""
        target = self.path(kind)
        temp = target.with_name(f"{target.name}.{os.getpid()}.part")
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            temp.write_bytes(orjson.dumps({"kind": kind, **dict(zip(_FIELDS, pool.parts))}))
            os.replace(temp, target)
        except OSError:
            try:
                temp.unlink(missing_ok=True)
            except OSError:
                pass  # no folder, or one that takes nothing: nothing was left there
            return
        self._trim()

    def _trim(self) -> None:
        """Delete the oldest entries beyond _KEEP (only files this module names)."""
        try:
            entries = [(p.stat().st_mtime_ns, p.name, p) for p in self.folder.glob(f"*{_SUFFIX}")]
        except OSError:
            return
        for _, _, path in sorted(entries, reverse=True)[_KEEP:]:
            try:
                path.unlink()
            except OSError:
                pass
