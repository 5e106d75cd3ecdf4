"""Prepared content pools kept on disk between runs, so a later run on the same machine skips building them.

A pool is a pure function of fastgen's code and the libraries it draws and counts with, the tokenizer, the seed and
its kind, and its entry is keyed by a hash of all of them: the code as the bytes of every module of the package (an
edited checkout never reads a pool an older version made), numpy's, tokenizers' and Python's versions (numpy may
change how a Generator draws between releases), the tokenizer as the sha256 of its tokenizer.json. Entries live in
$XDG_CACHE_HOME/fastgen/pools (~/.cache/fastgen/pools by default), one file per pool: a line with the XXH3-128 of
the rest, then JSON (the pool's units, fillers and their counts: data, never code), written under a temporary name
and renamed. An entry that is missing, unreadable or not exactly what was written is built again; a folder that
cannot be written is skipped: the cache only ever saves time, it never changes a byte of the output. The folder
keeps the most recently used entries (_KEEP) and deletes older ones of its own. `fastgen --no-cache` neither reads
nor writes it.

Beside the pools, the same way: a run's facts, what the parent otherwise proves and measures before any worker
starts (whether the chat template's counts decompose, the window's template margin), keyed also by the workload,
the model and the counting mode (facts_key): a later run of the same set starts its workers that much sooner.
"""

from __future__ import annotations

import os
import platform
import time
from functools import lru_cache
from pathlib import Path
from typing import Mapping

import numpy
import orjson
import tokenizers
import xxhash

from ..formats.atomic import write_atomically
from .content.compose import Pool
from ..version import __version__

__all__ = ["PoolCache", "cache_folder", "code_fingerprint", "facts_key"]

_SUFFIX = ".pool.json"
_PART = ".part"
# entries (about 0.3 MB each, 2.2 MB a set with the built-in tokenizer): 8 pools for each of 16 tokenizer-and-seed
# pairs
_KEEP = 128
_STALE_PART_S = 3600  # a temporary file this old was left by a run that was killed while writing it
_FIELDS = ("units", "counts", "fillers", "filler_counts")


def cache_folder(env: Mapping[str, str] = os.environ) -> Path | None:
    """Where entries live: $XDG_CACHE_HOME/fastgen/pools, or ~/.cache/fastgen/pools where that is unset or not an
    absolute path (as the XDG base directory specification says to treat it); None without a home folder either."""
    base = env.get("XDG_CACHE_HOME", "")
    if os.path.isabs(base):
        return Path(base) / "fastgen" / "pools"
    try:
        home = Path.home()
    except RuntimeError:  # no HOME and no password entry (a bare container user)
        return None
    # HOME="" reads as "/": not a home anyone meant to write a cache into
    return home / ".cache" / "fastgen" / "pools" if home.is_absolute() and home != Path("/") else None


@lru_cache(maxsize=1)
def code_fingerprint() -> str:
    """A hash of fastgen's version, every module of the package (path and bytes, in path order) and the versions of
    what pools are drawn and counted with."""
    package = Path(__file__).resolve().parents[1]  # all of fastgen, not only the generator
    digest = xxhash.xxh3_128(
        "|".join((__version__, numpy.__version__, tokenizers.__version__, platform.python_version())).encode()
    )
    for path in sorted(package.rglob("*.py")):
        digest.update(path.relative_to(package).as_posix().encode() + b"\0")
        digest.update(path.read_bytes())
    return digest.hexdigest()


def _entry_bytes(kind: str, doc: dict) -> bytes:
    payload = orjson.dumps({"kind": kind, **doc})
    return xxhash.xxh3_128_hexdigest(payload).encode() + b"\n" + payload


def _entry_of(kind: str, data: bytes) -> dict | None:
    """The document an entry holds, or None unless it is whole (its hash matches) and of `kind`."""
    digest, _, payload = data.partition(b"\n")
    if digest != xxhash.xxh3_128_hexdigest(payload).encode():
        return None
    try:
        doc = orjson.loads(payload)
    except orjson.JSONDecodeError:
        return None
    return doc if isinstance(doc, dict) and doc.get("kind") == kind else None


def _pool_of(doc: dict) -> Pool | None:
    """The pool an entry's document holds, or None unless it is of the expected shape."""
    if not all(isinstance(doc.get(name), list) for name in _FIELDS):
        return None
    units, counts, fillers, filler_counts = (doc[name] for name in _FIELDS)
    if not (
        units
        and fillers
        and len(units) == len(counts)
        and len(fillers) == len(filler_counts)
        and all(isinstance(t, str) and t for t in units + fillers)
        and all(type(c) is int and c > 0 for c in counts + filler_counts)
    ):
        return None
    return Pool(units, counts, fillers, filler_counts)


def facts_key(*parts: object) -> str:
    """The kind of a facts entry: a hash of everything the facts were derived from (beyond the code, the tokenizer
    and the seed, which every entry's name already holds), each part as canonical JSON."""
    digest = xxhash.xxh3_128()
    for part in parts:
        digest.update(orjson.dumps(part, option=orjson.OPT_SORT_KEYS) + b"\0")
    return "facts-" + digest.hexdigest()


class PoolCache:
    """The entries of one run: its tokenizer (by the sha256 of tokenizer.json) and seed."""

    def __init__(self, folder: Path, tokenizer_sha256: str, seed: int):
        self.folder = folder
        self._prefix = xxhash.xxh3_128(f"{code_fingerprint()}|{tokenizer_sha256}|{seed}".encode()).hexdigest()

    def path(self, kind: str) -> Path:
        return self.folder / f"{self._prefix}-{kind}{_SUFFIX}"

    def load(self, kind: str) -> Pool | None:
        """The stored pool of `kind` (marked used, for trim), or None where there is none that reads back whole."""
        doc = self._load(kind)
        return None if doc is None else _pool_of(doc)

    def store(self, kind: str, pool: Pool) -> None:
        """Write the pool of `kind`, all or nothing; a failure only means no entry (Ctrl-C still stops the run)."""
        self._store(kind, dict(zip(_FIELDS, pool.parts)))

    def load_facts(self, key: str) -> dict | None:
        """What a run proved and measured once (facts_key names from what), or None where there is no whole entry."""
        return self._load(key)

    def store_facts(self, key: str, facts: dict) -> None:
        self._store(key, facts)

    def _load(self, kind: str) -> dict | None:
        path = self.path(kind)
        try:
            doc = _entry_of(kind, path.read_bytes())
            if doc is not None:
                os.utime(path)
        except OSError:
            return None
        return doc

    def _store(self, kind: str, doc: dict) -> None:
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            # a name trim() knows: a temporary file a killed run left is swept when it is stale
            temp = self.folder / f".{kind}-{os.getpid()}{_PART}"
            write_atomically(self.path(kind), _entry_bytes(kind, doc), temp=temp)
        except Exception:
            pass  # a cache that cannot be written only saves no time

    def trim(self) -> None:
        """Delete the least recently used entries beyond _KEEP, and temporary files a killed run left (only files
        this module names)."""
        try:
            entries = [(p.stat().st_mtime_ns, p.name, p) for p in self.folder.glob(f"*{_SUFFIX}")]
            parts = [(p.stat().st_mtime, p) for p in self.folder.glob(f".*{_PART}")]
        except OSError:
            return
        stale = [p for mtime, p in parts if mtime < time.time() - _STALE_PART_S]  # housekeeping: never in the output
        for path in [p for _, _, p in sorted(entries, reverse=True)[_KEEP:]] + stale:
            try:
                path.unlink()
            except OSError:
                pass
