"""Files: generate a whole dataset into a fresh staging folder across a process pool, then swap it into place.

Each worker builds and writes its own sessions (big bytes never cross processes; the parent only gathers sizes and
hashes). Nothing is written into the output folder itself until every file and the manifest exist, so a failed or
interrupted run leaves the previous output untouched and no partial files behind.
"""

from __future__ import annotations

import multiprocessing
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from .compression import ZSTD_SUFFIX, compress_chunks, make_compressor
from .dataset import DIRECTORIES, DatasetBuilder, Task, tasks
from .errors import OutputError
from .manifest import MANIFEST_NAME, FileRecord, manifest_bytes, read_manifest, record
from .spec import Spec
from .tokenizer import Tokenizer

__all__ = ["RunOptions", "generate", "check_output_dir", "TOKENIZER_FOLDER"]

TOKENIZER_FOLDER = "tokenizer"


@dataclass(frozen=True)
class RunOptions:
    model: str
    tokenizer: str
    seed: int
    spec: Spec
    output_dir: Path
    workers: int
    progress: bool = False
    arguments: dict | None = None  # recorded in the manifest
    zstd_level: int | None = None  # None: plain .json; else .json.zst at this level


def check_output_dir(path: Path) -> None:
    """Refuse a folder that holds anything fastgen did not write: a previous output may only hold what its
    manifest lists, since regenerating replaces the folder whole."""
    if path.exists() and not path.is_dir():
        raise OutputError(f"output {path} exists and is not a folder; choose another --output-dir")
    if not path.is_dir() or not any(path.iterdir()):
        return
    try:
        listed = set(read_manifest(path)["files"]) | {MANIFEST_NAME}
    except OutputError:
        listed = set()  # not a fastgen output: everything in it is foreign, even empty folders
    foreign = sorted(p.relative_to(path).as_posix() for p in path.rglob("*")
                     if not (p.is_dir() and listed) and p.relative_to(path).as_posix() not in listed)
    if foreign:
        example = foreign[0]
        raise OutputError(f"output folder {path} holds files fastgen did not write (e.g. {example}); move them "
                          f"out or choose an empty --output-dir (fastgen never deletes files it did not write)")


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


class _Writer:
    """Writes one session's files under a root (via a temporary name and a rename), optionally zstd-compressed."""

    def __init__(self, root: Path, zstd_level: int | None):
        self.root = root
        self.compressor = make_compressor(zstd_level) if zstd_level is not None else None

    def write(self, rel: str, chunks: list[bytes]) -> FileRecord:
        if self.compressor is not None:
            rel, chunks = rel + ZSTD_SUFFIX, compress_chunks(self.compressor, chunks)
        final = self.root / rel
        temp = final.with_name(final.name + ".part")
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666)
        try:
            _write_all(fd, chunks)
        finally:
            os.close(fd)
        os.replace(temp, final)
        return record(rel, *chunks)

    def session(self, builder: DatasetBuilder, task: Task) -> list[FileRecord]:
        return [self.write(rel, chunks) for rel, chunks in builder.chunks_for(task)]


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


# Each worker process holds what it was handed at start (inherited as is under fork, pickled under spawn).
_worker: tuple[DatasetBuilder, _Writer] | None = None


def _adopt(builder: DatasetBuilder, root: str, zstd_level: int | None) -> None:
    global _worker
    _worker = (builder, _Writer(Path(root), zstd_level))


def _run_task(task: Task) -> list[FileRecord]:
    builder, writer = _worker
    return writer.session(builder, task)


def _pool_context():
    """The one place the start method is chosen: fork shares the prepared pools and blocks at no cost; the
    tokenizer's own threads are off in the children (set before forking, as tokenizers asks)."""
    methods = multiprocessing.get_all_start_methods()
    return multiprocessing.get_context("fork" if "fork" in methods else "spawn")


def _progress(total: int, enabled: bool):
    from tqdm import tqdm

    return tqdm(total=total, unit="file", desc="fastgen", disable=not enabled, dynamic_ncols=True)


def _generate_into(staging: Path, options: RunOptions, tokenizer: Tokenizer) -> list[FileRecord]:
    for name in DIRECTORIES:
        (staging / name).mkdir()
    todo = tasks(options.spec)
    files_per_task = {1: 1, 2: 2, 3: 2}
    builder = DatasetBuilder(tokenizer, options.spec, seed=options.seed, model=options.model).prepare()
    records: list[FileRecord] = []
    with _progress(sum(files_per_task[t.scenario_id] for t in todo), options.progress) as bar:
        def done(batch: list[FileRecord]) -> None:
            records.extend(batch)
            bar.update(len(batch))
            bar.set_postfix_str(f"{sum(r.size for r in records) / 1e6:,.0f} MB", refresh=False)

        if options.workers <= 1:
            writer = _Writer(staging, options.zstd_level)
            for task in todo:
                done(writer.session(builder, task))
            return records
        previous = os.environ.get("TOKENIZERS_PARALLELISM")
        os.environ["TOKENIZERS_PARALLELISM"] = "false"
        try:
            with _pool_context().Pool(options.workers, initializer=_adopt,
                                      initargs=(builder, str(staging), options.zstd_level)) as pool:
                for batch in pool.imap_unordered(_run_task, todo):
                    done(batch)
        finally:
            if previous is None:
                os.environ.pop("TOKENIZERS_PARALLELISM", None)
            else:
                os.environ["TOKENIZERS_PARALLELISM"] = previous
    return records


def generate(options: RunOptions, tokenizer: Tokenizer) -> list[FileRecord]:
    """Write the dataset, the tokenizer folder and the manifest to options.output_dir; return the file records."""
    out = options.output_dir
    check_output_dir(out)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.fastgen-", dir=out.parent))
        staging.chmod(0o777 & ~_umask())  # mkdtemp makes it private; the dataset should not be
    except OSError as exc:
        raise OutputError(f"cannot write into {out.parent} ({exc.strerror}); choose a writable --output-dir") from exc
    try:
        records = _generate_into(staging, options, tokenizer)
        records += [record(f"{TOKENIZER_FOLDER}/{name}", data) for name, data in tokenizer.export(staging / TOKENIZER_FOLDER)]
        records.sort()
        (staging / MANIFEST_NAME).write_bytes(manifest_bytes(
            files=records, tokenizer=tokenizer.identity.to_dict(), spec=options.spec.to_dict(),
            arguments=options.arguments or {}))
        _swap_into_place(staging, out)
    except OSError as exc:
        shutil.rmtree(staging, ignore_errors=True)
        raise OutputError(f"writing {out} failed: {exc}; nothing was changed there") from exc
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return records


def _swap_into_place(staging: Path, out: Path) -> None:
    if not out.exists():
        os.replace(staging, out)
        return
    old = Path(tempfile.mkdtemp(prefix=f".{out.name}.fastgen-old-", dir=out.parent))
    try:
        os.replace(out, old / "previous")
    except OSError:
        old.rmdir()  # e.g. --output-dir . cannot be renamed: leave no empty swap folder behind
        raise
    try:
        os.replace(staging, out)
    except OSError:
        os.replace(old / "previous", out)  # put the previous output back, as generate() promises
        old.rmdir()
        raise
    shutil.rmtree(old, ignore_errors=True)
