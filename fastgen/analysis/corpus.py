"""One trace directory's sessions as planned requests: each file read as inference-perf reads it (traces.requests),
its prompts rebuilt and tokenized (traces.blocks), kept as block ids (cache.BlockIds), never as text.

Reading is most of `fastgen analyze`'s time (the graph builder, the chat template, the tokenizer), and each file is
independent of the others, so `load` reads many files on a pool of spawned processes, each with its own reading of
the tokenizer folder; block hashes come back and are numbered here, in file order, the same for any worker count.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Iterable, Iterator, Optional

import numpy as np

from ..errors import OutputError
from ..processes import context, usable_cpus, workers_for
from ..traces.blocks import PromptReading, block_hashes, load_reading, tail_hash
from ..traces.graph import trace_files
from ..traces.requests import read_session
from .cache import BlockIds
from .schedule import PlannedRequest

__all__ = ["Corpus", "Readers"]

_FILES_PER_WORKER = 16  # below this many files a worker's start (seconds: it imports inference-perf) does not pay

# (event id, predecessors, wait ms, block hashes, prompt tokens, output tokens, label, tail hash)
_Read = tuple[str, tuple, int, np.ndarray, int, int, str, Optional[int]]


def _read_file(path: Path, reading: PromptReading, block_size: int) -> tuple[str, list[_Read], str]:
    """(session id, its requests with block hashes, the reading's name after it): one file, as the replay reads it."""
    try:
        session = read_session(path)
    except OutputError:
        raise
    except Exception as exc:  # noqa: BLE001 - whatever makes the replay skip the file
        raise OutputError(f"{path} cannot be read as inference-perf reads it ({type(exc).__name__}: "
                          f"{str(exc)[:160]}); regenerate or remove it") from None
    read = []
    for number, request in enumerate(session.requests, start=1):
        ids = reading.ids(request)
        hashes = block_hashes(ids, block_size)
        tail = tail_hash(ids, block_size, int(hashes[-1]) if len(hashes) else 0)
        read.append((request.event_id, request.predecessors, request.wait_ms, hashes, len(ids),
                     request.output_tokens, str(request.attributes.get("fastgen.turn", number)), tail))
    return session.session_id, read, reading.name


_worker: dict = {}


def _start_worker(source: tuple[str, str], block_size: int) -> None:
    _worker.update(reading=load_reading(Path(source[0]), source[1]), block_size=block_size)


def _read_in_worker(path: Path) -> tuple[str, list[_Read], str]:
    return _read_file(path, _worker["reading"], _worker["block_size"])


class Corpus:
    """A trace directory's sessions, each file read and tokenized once: by `load` (in parallel), or on first use."""

    def __init__(self, folder: Path, reading: PromptReading, block_size: int) -> None:
        self.files = trace_files(folder)
        if not self.files:
            raise OutputError(f"{folder} holds no trace files (*.json, *.json.zst)")
        self._reading, self.block_size = reading, block_size
        self._sessions: dict[int, list[PlannedRequest]] = {}
        self._ids: dict[int, str] = {}
        self._blocks = BlockIds()  # one id space per corpus: its configs' caches index by it
        self.reading_name = reading.name  # what a worker's reading became, where it changed (read whole)

    def session_id(self, index: int) -> str:
        """The file's session_id, as inference-perf names it before its trace<slot>_ prefix."""
        self.session(index)
        return self._ids[index]

    def request(self, file_index: int, event_id: str) -> PlannedRequest:
        return next(r for r in self.session(file_index) if r.event_id == event_id)

    def session(self, index: int) -> list[PlannedRequest]:
        if index not in self._sessions:
            session_id, read, reading_name = _read_file(self.files[index], self._reading, self.block_size)
            self._ids[index], self._sessions[index] = session_id, self._plan(read, reading_name)
        return self._sessions[index]

    def load(self, indexes: Iterable[int], readers: "Readers",
             progress: Optional[Callable[[int, int], None]] = None) -> None:
        """Read the files at `indexes` now and keep them, with `readers` (in parallel where it has a pool)."""
        todo = [i for i in sorted(set(indexes)) if i not in self._sessions]
        for index, session_id, planned in self._read(todo, readers, progress):
            self._ids[index], self._sessions[index] = session_id, planned

    def stream(self, indexes: list[int], readers: "Readers", progress: Optional[Callable[[int, int], None]] = None
               ) -> Iterator[tuple[int, list[PlannedRequest]]]:
        """(file index, its requests) for each of `indexes`, in that order, read as they are asked for (a few files
        ahead on the pool) and not kept."""
        return ((index, planned) for index, _, planned in self._read(indexes, readers, progress))

    def _read(self, indexes: list[int], readers: "Readers", progress: Optional[Callable[[int, int], None]]
              ) -> Iterator[tuple[int, str, list[PlannedRequest]]]:
        results = readers.read([self.files[i] for i in indexes]) if readers.parallel(len(indexes)) else \
            (_read_file(self.files[i], self._reading, self.block_size) for i in indexes)
        for done, (index, (session_id, read, reading_name)) in enumerate(zip(indexes, results), 1):
            yield index, session_id, self._plan(read, reading_name)
            if progress:
                progress(done, len(indexes))

    def _plan(self, read: list[_Read], reading_name: str) -> list[PlannedRequest]:
        if reading_name != self._reading.name:
            self.reading_name = reading_name
        # the session's blocks numbered in one go: its turns repeat each other's prefixes
        tails = [r[7] for r in read if r[7] is not None]
        numbered = self._blocks.of(np.concatenate([r[3] for r in read] + [np.asarray(tails, dtype=np.uint64)]))
        tail_ids = iter(numbered[len(numbered) - len(tails):].tolist())
        planned, at = [], 0
        for event_id, predecessors, wait_ms, hashes, prompt_tokens, output_tokens, label, tail in read:
            blocks, at = numbered[at:at + len(hashes)], at + len(hashes)
            planned.append(PlannedRequest(event_id, predecessors, wait_ms, blocks, prompt_tokens, output_tokens,
                                          label, None if tail is None else next(tail_ids)))
        return planned


class Readers:
    """A pool of processes that read trace files, started on first use and shared by every Corpus of a run (each
    worker imports inference-perf and loads the tokenizer once: seconds)."""

    def __init__(self, reading: PromptReading, block_size: int, workers: Optional[int] = None) -> None:
        self._source = getattr(reading, "source", None)  # None: a reading load_reading did not make
        self._block_size = block_size
        self._workers = usable_cpus() if workers is None else workers
        self._pool = None

    def parallel(self, files: int) -> bool:
        return self._source is not None and workers_for(files, _FILES_PER_WORKER, self._workers) > 1

    def read(self, paths: list[Path]) -> Iterator[tuple[str, list[_Read], str]]:
        """Each file's reading, in order. The pool works at most two batches ahead of the caller: a pool's imap
        would read them all and queue the results here, however slowly they are used."""
        if self._pool is None:
            # spawn: the workers import inference-perf, and this process may have started tokenizer threads
            self._pool = context("spawn").Pool(self._workers, _start_worker, (self._source, self._block_size))
        chunksize = max(1, min(8, len(paths) // (4 * self._workers)))
        batch = 4 * chunksize * self._workers
        pending = []
        for start in range(0, len(paths), batch):
            pending.append(self._pool.imap(_read_in_worker, paths[start:start + batch], chunksize))
            if len(pending) > 1:
                yield from pending.pop(0)
        for results in pending:
            yield from results

    def __enter__(self) -> "Readers":
        return self

    def __exit__(self, *exc) -> None:
        if self._pool is not None:
            self._pool.terminate()
            self._pool.join()
            self._pool = None
