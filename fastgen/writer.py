"""Writing one session's files: temporary name, os.writev of the chunks, rename; optional zstd; size and hash."""

from __future__ import annotations

import os
from pathlib import Path

from .compression import ZSTD_SUFFIX, compress_chunks, make_compressor
from .dataset import DatasetBuilder, Task
from .errors import OutputError
from .manifest import FileRecord, record

__all__ = ["SessionWriter", "PART_SUFFIX"]

PART_SUFFIX = ".part"
_IOV_MAX = 1024


def _write_all(fd: int, chunks: list[bytes]) -> None:
    """os.writev until every byte is written (a write may be short; at most IOV_MAX buffers a call)."""
    pending = [memoryview(c) for c in chunks if c]
    while pending:
        written = os.writev(fd, pending[:_IOV_MAX])
        while written and written >= len(pending[0]):
            written -= len(pending[0])
            pending.pop(0)
        if written:
            pending[0] = pending[0][written:]


class SessionWriter:
    """Writes the files of one session index under a root folder."""

    def __init__(self, root: Path, zstd_level: int | None):
        self.root = root
        self.compressor = make_compressor(zstd_level) if zstd_level is not None else None

    def write(self, rel: str, chunks: list[bytes]) -> FileRecord:
        if self.compressor is not None:
            rel, chunks = rel + ZSTD_SUFFIX, compress_chunks(self.compressor, chunks)
        final = self.root / rel
        temp = final.with_name(final.name + PART_SUFFIX)
        try:
            fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666)
            try:
                _write_all(fd, chunks)
            finally:
                os.close(fd)
            os.replace(temp, final)
        except OSError as exc:
            temp.unlink(missing_ok=True)
            raise OutputError(f"cannot write {final} ({exc.strerror or exc})") from None
        return record(rel, *chunks)

    def session(self, builder: DatasetBuilder, task: Task) -> list[FileRecord]:
        return [self.write(rel, chunks) for rel, chunks in builder.chunks_for(task)]
