"""Writing one session's files: temporary name, the chunks in vectored writes, rename; optional zstd; size and hash.
A file too big to hold (a trace directory's dataset file, rows.py) is streamed the same way."""

from __future__ import annotations

import errno
import os
import sys
from dataclasses import replace
from pathlib import Path
from typing import Iterable, Sequence

import xxhash

from .compression import ZSTD_SUFFIX, compress_chunks, make_compressor
from ..errors import OutputError
from .manifest import FileRecord, record

__all__ = ["SessionWriter", "PART_SUFFIX", "RWF_DONTCACHE", "part_path"]

PART_SUFFIX = ".part"
_IOV_MAX = 1024
# Linux 6.14+ "uncached buffered I/O": the write goes through the page cache as usual, but the kernel starts writeback
# at once and drops the pages when it is done, so the next file reuses the same memory instead of taking fresh pages.
# On the development VM, whose host reclaims memory the guest freed, that is 1.4 s instead of 6.6 s of kernel time
# for the default set. Where the kernel or the filesystem does not take the flag (EOPNOTSUPP; EINVAL from kernels
# that predate it), a writer falls back to plain writes.
RWF_DONTCACHE = getattr(os, "RWF_DONTCACHE", 0x80)
_HAS_PWRITEV = hasattr(os, "pwritev")


class _VectoredWrites:
    """Writes lists of buffers to new, empty files: pwritev with `flags` (dropped to 0 the first time the kernel
    refuses them), or writev where there is no pwritev."""

    def __init__(self, flags: int):
        self.flags = flags

    def write_all(self, fd: int, chunks: Sequence[bytes | memoryview], offset: int = 0) -> int:
        """Every chunk, in order, from offset (a write may be short; at most IOV_MAX buffers a call); returns the
        offset after them."""
        pending = [memoryview(c) for c in chunks if c]
        while pending:
            written = self._write(fd, pending[:_IOV_MAX], offset)
            offset += written
            while written and written >= len(pending[0]):
                written -= len(pending[0])
                pending.pop(0)
            if written:
                pending[0] = pending[0][written:]
        return offset

    def _write(self, fd: int, buffers: list[memoryview], offset: int) -> int:
        if not _HAS_PWRITEV:
            return os.writev(fd, buffers)  # the file offset advances with each write, from 0
        try:
            return os.pwritev(fd, buffers, offset, self.flags)
        except OSError as exc:
            if not self.flags or exc.errno not in (errno.EOPNOTSUPP, errno.EINVAL):
                raise
            self.flags = 0
            return os.pwritev(fd, buffers, offset, 0)


def part_path(final: Path) -> Path:
    """The temporary name a file is written under before it is renamed into place."""
    return final.with_name(final.name + PART_SUFFIX)


def _remove(temp: Path) -> None:
    try:
        temp.unlink(missing_ok=True)
    except OSError:
        pass  # nothing was made (the folder is not there, or not a folder): nothing to remove


class SessionWriter:
    """Writes the files of one session index under a root folder."""

    def __init__(self, root: Path, zstd_level: int | None):
        self.root = root
        self.compressor = make_compressor(zstd_level) if zstd_level is not None else None
        self.writes = _VectoredWrites(RWF_DONTCACHE if sys.platform.startswith("linux") else 0)

    def write(self, rel: str, chunks: list[bytes]) -> FileRecord:
        temp, rec = self.stage(rel, chunks)
        final = self.root / rec.path
        try:
            os.replace(temp, final)
        except OSError as exc:
            _remove(temp)
            raise OutputError(f"cannot write {final} ({exc.strerror or exc})") from None
        return rec

    def stream(self, rel: str, pieces: Iterable[Sequence[bytes | memoryview]]) -> FileRecord:
        """Write rel from pieces of chunks as they come (a file too big to hold: the dataset file of a trace
        directory), under its temporary name, then rename it into place; its record, like write's."""
        plain = xxhash.xxh3_128()
        stream = self.compressor.compressobj() if self.compressor is not None else None
        packed = xxhash.xxh3_128() if stream is not None else plain  # a plain file's bytes are hashed once
        plain_size = 0
        final = self.root / (rel + ZSTD_SUFFIX if stream is not None else rel)
        temp = part_path(final)
        try:
            fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666)
            try:
                offset = 0
                for chunks in pieces:
                    for chunk in chunks:
                        plain.update(chunk)
                        plain_size += len(chunk)
                    out = chunks if stream is None else [stream.compress(c) for c in chunks]
                    if stream is not None:
                        for chunk in out:
                            packed.update(chunk)
                    offset = self.writes.write_all(fd, out, offset)
                if stream is not None:
                    tail = stream.flush()
                    packed.update(tail)
                    offset = self.writes.write_all(fd, [tail], offset)
            finally:
                os.close(fd)
            os.replace(temp, final)
        except BaseException as exc:  # Ctrl-C too: a half-written temporary file is nobody's
            _remove(temp)
            if isinstance(exc, OSError):
                raise OutputError(f"cannot write {final} ({exc.strerror or exc})") from None
            raise
        if stream is None:
            return FileRecord(rel, plain_size, plain.hexdigest())
        return FileRecord(
            final.relative_to(self.root).as_posix(), offset, packed.hexdigest(), (plain_size, plain.hexdigest())
        )

    def stage(self, rel: str, chunks: list[bytes]) -> tuple[Path, FileRecord]:
        """Write rel's bytes under its temporary name and leave them there; returns the temporary path and the record
        of the file it becomes. The caller renames it into place (write does), or removes it."""
        plain = None
        if self.compressor is not None:
            plain = record(rel, *chunks)  # the decompressed content's size and hash, for verify and unpack
            rel, chunks = rel + ZSTD_SUFFIX, compress_chunks(self.compressor, chunks)
        final = self.root / rel
        temp = part_path(final)
        try:
            fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666)
            try:
                self.writes.write_all(fd, chunks)
            finally:
                os.close(fd)
        except BaseException as exc:  # Ctrl-C too: a half-written temporary file is nobody's
            _remove(temp)
            if isinstance(exc, OSError):
                raise OutputError(f"cannot write {final} ({exc.strerror or exc})") from None
            raise
        rec = record(rel, *chunks)
        return temp, rec if plain is None else replace(rec, content=(plain.size, plain.digest))
