"""The process pool: every session index written by some worker; a failure anywhere stops the run within moments.

Workers are forked from a parent that has already prepared the builder (pools and shared blocks), so they start
with everything in memory; the preparation's independent pieces are themselves built by a first, short-lived pool
forked from the unprepared builder. Workers ignore SIGINT (Ctrl-C is the parent's to handle, and it stops them
itself) and die quietly on SIGTERM, which is how the pool stops them. A worker that raises, or dies (killed, out of
memory), fails the run with the sessions that were not written named.
"""

from __future__ import annotations

import os
import signal
from concurrent.futures import FIRST_EXCEPTION, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from pathlib import Path
from typing import Callable

from .dataset import DatasetBuilder, Piece, Task
from ..errors import OutputError
from ..formats.manifest import FileRecord
from ..processes import context
from ..formats.writer import SessionWriter

__all__ = ["run_tasks", "build_pieces", "describe_task"]

# Each worker process holds what it was handed at start (inherited as is under fork, pickled under spawn); a pool
# that builds prepare's pieces has no writer.
_worker: tuple[DatasetBuilder, SessionWriter | None] | None = None


def describe_task(task: Task) -> str:
    return f"scenario {task.scenario_id} session {task.index}"


def _adopt(builder: DatasetBuilder, root: str | None, zstd_level: int | None) -> None:
    global _worker
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # not the parent's handler: a stopped worker just ends
    _worker = (builder, SessionWriter(Path(root), zstd_level) if root is not None else None)


def _write_session(writer: SessionWriter, builder: DatasetBuilder, task: Task) -> list[FileRecord]:
    """Every file of one task, written. Here, not in the writer, so the writer (and verify, unpack) knows no builder."""
    return [writer.write(rel, chunks) for rel, chunks in builder.chunks_for(task)]


def _run_task(task: Task) -> list[FileRecord]:
    assert _worker is not None  # _adopt set it as this worker started
    builder, writer = _worker
    assert writer is not None  # a pool that runs tasks (run_tasks) hands its workers a root
    return _write_session(writer, builder, task)


def _build_piece(piece: Piece):
    assert _worker is not None  # _adopt set it as this worker started
    return _worker[0].build_piece(piece)


@contextmanager
def _no_tokenizer_threads():
    """tokenizers asks for its thread pool to be off in forked children; say so before forking."""
    previous = os.environ.get("TOKENIZERS_PARALLELISM")
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop("TOKENIZERS_PARALLELISM", None)
        else:
            os.environ["TOKENIZERS_PARALLELISM"] = previous


def _failure(exc: BaseException, unfinished: list[Task]) -> OutputError:
    names = ", ".join(describe_task(t) for t in unfinished[:5]) + (" ..." if len(unfinished) > 5 else "")
    if isinstance(exc, BrokenProcessPool):
        return OutputError(f"a worker process died; {len(unfinished)} session(s) not written ({names})")
    return OutputError(f"{exc}; {len(unfinished)} session(s) not written ({names})")


@contextmanager
def _pool(builder: DatasetBuilder, workers: int, *, root: Path | None = None, zstd_level: int | None = None):
    """A fork pool for the block's whole life: workers fork at the first submit, not when the pool is made, so the
    tokenizers setting must hold until it is shut down."""
    with _no_tokenizer_threads():
        executor = ProcessPoolExecutor(
            workers,
            mp_context=context("fork-prepared"),
            initializer=_adopt,
            initargs=(builder, None if root is None else str(root), zstd_level),
        )
        try:
            yield executor
        finally:
            executor.shutdown(wait=True, cancel_futures=True)


def build_pieces(builder: DatasetBuilder, workers: int) -> Callable[[list[Piece]], list]:
    """DatasetBuilder.prepare's pieces built by `workers` processes forked from the unprepared builder."""

    def build(pieces: list[Piece]) -> list:
        # catalogs alone (their pools came from the cache) take milliseconds: less than starting processes
        if workers <= 1 or all(what != "pool" for what, _ in pieces):
            return [builder.build_piece(piece) for piece in pieces]
        try:
            with _pool(builder, min(workers, len(pieces))) as executor:
                return list(executor.map(_build_piece, pieces))
        except BrokenProcessPool:
            raise OutputError(
                "a worker process died while building the content pools and tool catalogs; nothing was written"
            ) from None

    return build


def run_tasks(
    builder: DatasetBuilder,
    todo: list[Task],
    *,
    root: Path,
    zstd_level: int | None,
    workers: int,
    done: Callable[[list[FileRecord]], None],
    meanwhile: Callable[[], None] = lambda: None,
) -> None:
    """Write every task's files under root, calling done() with each task's records as it finishes. `meanwhile`
    runs in this process once the workers are writing (before the first task with one worker): checks that do not
    feed the workers stay off the critical path, and one that raises stops the run like a failed task."""
    if workers <= 1:
        meanwhile()
        writer = SessionWriter(root, zstd_level)
        for task in todo:
            done(_write_session(writer, builder, task))
        return
    with _pool(builder, workers, root=root, zstd_level=zstd_level) as executor:
        pending = {executor.submit(_run_task, task): task for task in todo}
        meanwhile()
        while pending:
            finished, _ = wait(pending, timeout=0.5, return_when=FIRST_EXCEPTION)
            for future in finished:
                task = pending.pop(future)
                failed = future.exception()
                if failed is not None:
                    raise _failure(failed, [task, *pending.values()])
                done(future.result())
