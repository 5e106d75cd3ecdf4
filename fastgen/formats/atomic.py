"""One file written atomically: into a temporary name in the target's folder, then renamed over the target.

A reader never sees half a file, and a failed or interrupted write (Ctrl-C too) leaves no temporary file and the old
target, if any, as it was. No fsync, as fastgen never has: the rename is atomic, not durable (a crash of the machine
may lose the new file; it never leaves a torn one where a reader looks). The session files, written by the thousand
in vectored writes, have their own writer (writer.py); this one is for the single files: configs, a manifest's
rewrite, a workload, an export, a report.
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO, Iterator

__all__ = ["atomic_open", "temp_path", "write_atomically"]


def temp_path(target: Path) -> Path:
    """The temporary name beside `target`: hidden, and per process, so two processes never share one."""
    return target.with_name(f".{target.name}.{os.getpid()}.tmp")


@contextmanager
def atomic_open(target: Path, *, temp: Path | None = None) -> Iterator[BinaryIO]:
    """A binary file to write `target`'s bytes into; they replace `target` when the block ends without an error.
    `temp` names the temporary file where a later run must find one a kill left behind (default: temp_path).
    OSError comes out as raised: the caller says what it was writing."""
    target = Path(target)
    temp = temp if temp is not None else temp_path(target)
    # os.open with 0o666 honours the umask (mkstemp would leave the file readable by its owner only)
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666)
    try:
        with os.fdopen(fd, "wb") as handle:
            yield handle
        os.replace(temp, target)
    except BaseException:  # Ctrl-C too: a half-written temporary file is nobody's
        try:
            temp.unlink(missing_ok=True)
        except OSError:
            pass  # the error that brought us here is the one to see
        raise


def write_atomically(target: Path, data: bytes | str, *, temp: Path | None = None) -> None:
    """`data` (text as UTF-8, newlines as they are) into `target`, atomically (`temp`: as atomic_open's)."""
    with atomic_open(target, temp=temp) as handle:
        handle.write(data.encode("utf-8") if isinstance(data, str) else data)
