"""One trace directory's sessions as planned requests: each file read as inference-perf reads it (traces.requests),
its prompts rebuilt and tokenized (traces.blocks), kept as block ids (cache.BlockIds), never as text.

Reading is most of `fastgen analyze`'s time (the graph builder, the chat template, the tokenizer), and each file is
independent of the others, so `load` and `stream` read many files on a pool of spawned processes, each with its own
reading of the tokenizer folder; block hashes come back and are numbered here, in the order asked for, the same for
any worker count. `load` keeps the sessions; `stream` spills them to a temporary file and lets each session's own
blocks go when it is released, so that memory does not grow with the sessions of a directory.
"""

from __future__ import annotations

import multiprocessing.pool
import pickle
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable, Iterable, Iterator, Optional

import numpy as np

from ..errors import MissingExtraError, OutputError
from ..processes import context, usable_cpus, workers_for
from ..traces.blocks import PromptReading, block_hashes, load_reading, tail_hash
from ..traces.graph import trace_files
from ..traces.requests import ReplayRequest, SessionRequests, read_session
from .cache import BlockIds
from .schedule import PlannedRequest
from .sharing import SharedBlocks

__all__ = ["Corpus", "Readers", "Stream", "read_replayed"]

_FILES_PER_WORKER = 16  # below this many files a worker's start (seconds: it imports inference-perf) does not pay

# (event id, predecessors, wait ms, its blocks as indexes into the session's distinct hashes, prompt tokens, output
# tokens, label, the index of its tail's hash or None, max_tokens as sent)
_Read = tuple[str, tuple, int, np.ndarray, int, int, str, Optional[int], int]


@dataclass(frozen=True)
class _ReadSession:
    session_id: str
    distinct: np.ndarray  # the session's block and tail hashes, each once, sorted (its turns repeat each other's)
    requests: list[_Read]
    reading_name: str  # the reading's name after the file (a reading that had to fall back says so)


def read_replayed(path: Path) -> SessionRequests:
    """One file's requests as inference-perf's replay reads them (traces.requests); a file the replay would skip
    raises OutputError, naming the file and why."""
    try:
        return read_session(path)
    except (OutputError, MissingExtraError):  # an unreadable file says so itself; a missing extra is no file's fault
        raise
    except Exception as exc:  # noqa: BLE001 - whatever makes the replay skip the file
        raise OutputError(
            f"{path} cannot be read as inference-perf reads it ({type(exc).__name__}: "
            f"{str(exc)[:160]}); regenerate or remove it"
        ) from None


def _read_file(path: Path, reading: PromptReading, block_size: int, tools_as: str = "vllm") -> _ReadSession:
    """One file, as the replay reads it: its requests with their block hashes, their tools rendered as the engine
    `tools_as` renders them (engine_tools)."""
    session = read_replayed(path)
    blocks, tails, prompts = [], [], []
    for request in session.requests:
        ids = reading.ids(engine_tools(request, tools_as))
        hashes = block_hashes(ids, block_size)
        blocks.append(hashes)
        tails.append(tail_hash(ids, block_size, int(hashes[-1]) if len(hashes) else 0))
        prompts.append(len(ids))
    distinct = np.unique(np.concatenate(blocks + [np.asarray([t for t in tails if t is not None], dtype=np.uint64)]))
    read = []
    for number, (request, hashes, tail, prompt) in enumerate(zip(session.requests, blocks, tails, prompts), 1):
        at = np.searchsorted(distinct, hashes).astype(np.int32)
        tail_at = None if tail is None else int(np.searchsorted(distinct, np.uint64(tail)))
        read.append(
            (
                request.event_id,
                request.predecessors,
                request.wait_ms,
                at,
                prompt,
                request.output_tokens,
                str(request.attributes.get("fastgen.turn", number)),
                tail_at,
                request.max_tokens,
            )
        )
    return _ReadSession(session.session_id, distinct, read, reading.name)


def engine_tools(request: ReplayRequest, engine: str) -> ReplayRequest:
    """`request` with its tools as `engine` hands them to the chat template. SGLang 0.5.23 validates each tool into its
    Tool model and renders `model_dump()`, which keeps the unset `defer_loading` as null
    (srt/entrypoints/openai/serving_chat.py _process_messages; its Function model drops its own unset fields): 8 more
    tokens a tool with fastgen's built-in tokenizer, measured as 48 more on every e2e prompt of six tools. vLLM
    renders the tools as sent."""
    if engine != "sglang" or not request.tools:
        return request
    return replace(request, tools=_with_null_defer_loading(request.tools))


_SGLANG_TOOLS: dict[int, tuple] = {}


def _with_null_defer_loading(tools: tuple) -> tuple:
    known = _SGLANG_TOOLS.get(id(tools))
    if known is None or known[0] is not tools:  # wire_tools shares one tuple among a session's requests
        if len(_SGLANG_TOOLS) >= 256:
            _SGLANG_TOOLS.clear()
        known = _SGLANG_TOOLS[id(tools)] = (tools, tuple({**tool, "defer_loading": None} for tool in tools))
    return known[1]


_worker: dict = {}


def _start_worker(source: tuple[str, str], block_size: int, tools_as: str = "vllm") -> None:
    _worker.update(reading=load_reading(Path(source[0]), source[1]), block_size=block_size, tools_as=tools_as)


def _read_in_worker(path: Path) -> _ReadSession:
    return _read_file(path, _worker["reading"], _worker["block_size"], _worker["tools_as"])


class Corpus:
    """A trace directory's sessions, each file read and tokenized once: by `load` (in parallel), or on first use."""

    def __init__(self, folder: Path, reading: PromptReading, block_size: int, *, tools_as: str = "vllm") -> None:
        self.files = trace_files(folder)
        if not self.files:
            raise OutputError(f"{folder} holds no trace files (*.json, *.json.zst)")
        self._reading, self.block_size, self.tools_as = reading, block_size, tools_as
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
            read = _read_file(self.files[index], self._reading, self.block_size, self.tools_as)
            self._ids[index], self._sessions[index] = read.session_id, self._plan(read)
        return self._sessions[index]

    def load(
        self, indexes: Iterable[int], readers: "Readers", progress: Optional[Callable[[int, int], None]] = None
    ) -> None:
        """Read the files at `indexes` now and keep them, with `readers` (in parallel where it has a pool)."""
        todo = [i for i in sorted(set(indexes)) if i not in self._sessions]
        for index, read in self._read(todo, readers, progress):
            self._ids[index], self._sessions[index] = read.session_id, self._plan(read)

    def stream(
        self, indexes: list[int], readers: "Readers", progress: Optional[Callable[[int, int], None]] = None
    ) -> "Stream":
        """The files at `indexes`, read now (in parallel where `readers` has a pool) into a spill file, not kept:
        then (file index, its requests) in that order, each session's own blocks let go by `Stream.release`."""
        return Stream(self, indexes, readers, progress)

    def _read(
        self, indexes: list[int], readers: "Readers", progress: Optional[Callable[[int, int], None]]
    ) -> Iterator[tuple[int, _ReadSession]]:
        results = (
            readers.read([self.files[i] for i in indexes])
            if readers.parallel(len(indexes))
            else (_read_file(self.files[i], self._reading, self.block_size, self.tools_as) for i in indexes)
        )
        for done, (index, read) in enumerate(zip(indexes, results), 1):
            yield index, read
            if progress:
                progress(done, len(indexes))

    def _plan(self, read: _ReadSession) -> list[PlannedRequest]:
        if read.reading_name != self._reading.name:
            self.reading_name = read.reading_name
        ids = self._blocks.of_distinct(read.distinct)
        return [
            PlannedRequest(
                event_id,
                predecessors,
                wait_ms,
                ids[at],
                prompt_tokens,
                output_tokens,
                label,
                None if tail_at is None else int(ids[tail_at]),
                max_tokens,
            )
            for event_id, predecessors, wait_ms, at, prompt_tokens, output_tokens, label, tail_at, max_tokens in (
                read.requests
            )
        ]


class Stream:
    """A trace directory's sessions read once, in a given order, into an anonymous spill file (gone with the process,
    however it ends), with which of their blocks no other session has (sharing.SharedBlocks); then handed out in that
    order, numbered as they go. `release(index)`, once no replay will run the session again, lets its own blocks go:
    what stays is the blocks sessions share and those of the sessions not yet released."""

    def __init__(
        self, corpus: Corpus, indexes: list[int], readers: "Readers", progress: Optional[Callable[[int, int], None]]
    ) -> None:
        self._corpus, self._indexes = corpus, indexes
        self._shared = SharedBlocks()
        self._own: dict[int, np.ndarray] = {}  # sessions handed out, not released: the hashes only they have
        self._spill = tempfile.TemporaryFile(prefix="fastgen-analyze-")
        try:
            for _, read in corpus._read(indexes, readers, progress):
                self._shared.add_session(read.distinct)
                pickle.dump(read, self._spill, protocol=pickle.HIGHEST_PROTOCOL)
            self._spill.seek(0)
        except OSError as exc:
            self._spill.close()
            raise OutputError(
                f"cannot spill the read sessions into {tempfile.gettempdir()} ({exc.strerror}); free "
                f"space there or point TMPDIR at a folder with room"
            ) from None

    def __iter__(self) -> Iterator[tuple[int, list[PlannedRequest]]]:
        try:
            for index in self._indexes:
                read = pickle.load(self._spill)
                self._own[index] = read.distinct[self._shared.single(read.distinct)]
                yield index, self._corpus._plan(read)
        finally:
            self._spill.close()

    def release(self, index: int) -> np.ndarray:
        """The ids of the blocks only session `index` had, now free for other blocks."""
        return self._corpus._blocks.forget(self._own.pop(index))


class Readers:
    """A pool of processes that read trace files, started on first use and shared by every Corpus of a run (each
    worker imports inference-perf and loads the tokenizer once: seconds)."""

    def __init__(
        self, reading: PromptReading, block_size: int, workers: Optional[int] = None, *, tools_as: str = "vllm"
    ) -> None:
        self._source = getattr(reading, "source", None)  # None: a reading load_reading did not make
        self._block_size, self._tools_as = block_size, tools_as
        self._workers = usable_cpus() if workers is None else workers
        self._pool: Optional[multiprocessing.pool.Pool] = None

    def parallel(self, files: int) -> bool:
        return self._source is not None and workers_for(files, _FILES_PER_WORKER, self._workers) > 1

    def read(self, paths: list[Path]) -> Iterator[_ReadSession]:
        """Each file's reading, in order. The pool works at most two batches ahead of the caller: a pool's imap
        would read them all and queue the results here, however slowly they are used."""
        if self._pool is None:
            # spawn: the workers import inference-perf, and this process may have started tokenizer threads
            self._pool = context("spawn").Pool(
                self._workers, _start_worker, (self._source, self._block_size, self._tools_as)
            )
        chunksize = max(1, min(8, len(paths) // (4 * self._workers)))
        batch = 4 * chunksize * self._workers
        pending = []
        for start in range(0, len(paths), batch):
            pending.append(self._pool.imap(_read_in_worker, paths[start : start + batch], chunksize))
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
