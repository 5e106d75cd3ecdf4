"""One config's replay split into N disjoint shards, for N load generators (machines, pods, processes).

N copies of one config replay the same sessions, so every generator hits the prefix cache the others filled. A shard
replays its own share instead: the config's replayed slots (inference-perf's shuffle by `load.base_seed`, then the
first `num_sessions`), dealt round-robin in slot order, so together the shards replay exactly the config's sessions.

Each shard is a folder with its config and its own session-per-row dataset file (rows.py) holding exactly its
sessions, the rows' bytes copied as they are, so every request carries what the single config's would. In the shard
config:

- `num_sessions` is its share; `session_rate` the config's rate x share / total, so the shards together start
  sessions at the config's rate; `concurrent_sessions` scaled the same way, rounded up (0, all at once, stays 0);
- `load.base_seed` is base_seed x 1000 + k (its own random stream). The rows are written in the order that this
  seed's shuffle turns back into the shard's slot order, so each shard starts its sessions in the order the single
  config would have;
- the local report folder is the shard's own folder (`.`), and a GCS or S3 report path ends in `shard-k`:
  inference-perf's uploaders skip keys that exist, so a path shared by the shards would lose reports without a word;
- `server.base_url` is `base_url` when one is given (the server as the load generators reach it);
- session identity is left as it is. inference-perf's runtime id (the `session_id_header_key` header, the reports'
  session_id) is `trace{slot}_{session_id}`; slots restart at 0 in every shard, but the session_id part is the row's
  own, and the shards hold disjoint rows, so ids stay distinct wherever the dataset's session ids are (fastgen's
  are, by construction). `attribute_to_header_map` values are span attributes of a session: disjoint too. Rewriting
  ids would change the rows' bytes, and with them the requests.

A shard travels as it is: every path in its config is relative to the shard's folder (its dataset file, the
tokenizer, which is copied into the shard as `tokenizer/` when the config names a folder, and its reports, written
beside its config), so a shard copied to another machine runs there with inference-perf started from inside it; a hub
tokenizer id stays as it is. The shards' manifest.json (in the folder above them) lists every file with its hash.
"""

from __future__ import annotations

import copy
import math
import mmap
import shutil
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Iterator, Optional

import numpy as np
import xxhash
import yaml

from ..errors import OutputError, SpecError
from ..formats.atomic import write_atomically
from ..formats.compression import ZSTD_SUFFIX, decompress, read_trace_bytes
from ..formats.config_document import ConfigDocument
from ..formats.manifest import (
    GENERATOR,
    MANIFEST_NAME,
    FileRecord,
    listed_record,
    read_manifest,
    record,
    rewrite_files,
)
from ..formats.outdir import discard, open_staging, place_all
from ..formats.run_folder import shard_folder
from ..formats.rows import dataset_file, replay_slots, row_chunks
from ..formats.writer import SessionWriter

__all__ = [
    "SHARD_SEED_FACTOR",
    "SHARD_TOKENIZER",
    "SHARDS_FORMAT",
    "Shard",
    "check_dataset",
    "plan_shards",
    "write_shards",
]

SHARD_SEED_FACTOR = 1000  # shard k's load.base_seed: base_seed * SHARD_SEED_FACTOR + k
# the shards' manifest.json: 2 names its keys (format_version, shard_count, source_config); 1 wrote the version
# under "shards" and the config's absolute path. Nothing reads either back: the files are checked by their hashes.
SHARDS_FORMAT = 2
SHARD_TOKENIZER = "./tokenizer"  # a shard's copy of a tokenizer folder, as its config names it


@dataclass(frozen=True)
class Shard:
    index: int  # 0..count-1
    count: int
    slots: tuple[int, ...]  # file indices of the sessions this shard replays: disjoint, union = the config's replay
    config: dict  # the inference-perf config this shard runs
    tokenizer: Optional[Path] = None  # the tokenizer folder copied into the shard (SHARD_TOKENIZER); None: a hub id

    @property
    def name(self) -> str:
        return shard_folder(self.index)


@dataclass(frozen=True)
class _Source:
    """Where a config's sessions are: a dataset file (one row a session) or a trace directory (one file a session)."""

    config_dir: Path
    dataset: Optional[Path]  # the dataset file
    trace_dir: Optional[Path]

    @property
    def row_file(self) -> str:
        """The name of a shard's dataset file: the config's own dataset file's, plain."""
        if self.dataset is not None:
            return self.dataset.name.removesuffix(ZSTD_SUFFIX)
        assert self.trace_dir is not None
        return dataset_file(self.trace_dir.name)

    def trace_files(self) -> list[Path]:
        assert self.trace_dir is not None
        return sorted(self.trace_dir.glob("*.json"))  # what inference-perf reads: sorted(dir.glob("*.json"))


def _read_config(config_path: Path) -> ConfigDocument:
    try:
        document = yaml.safe_load(Path(config_path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise OutputError(f"cannot read {config_path} ({exc.strerror or exc}); give an inference-perf config") from None
    except yaml.YAMLError as exc:
        raise OutputError(f"{config_path} is not YAML ({str(exc)[:80]}); give an inference-perf config") from None
    if not isinstance(document, dict):
        raise OutputError(f"{config_path} is not an inference-perf config; give one fastgen wrote")
    return ConfigDocument(document)


def _shardable_stage(document: ConfigDocument, config_path: Path) -> dict:
    """load.stages[0] of a config that can be sharded."""
    try:
        replay = document.replay
        stages = document.stages
        stage = stages[0]
        seed = document.base_seed
    except (KeyError, IndexError, TypeError):
        raise OutputError(
            f"{config_path} is not an otel_trace_replay config with load.base_seed and a stage; give one fastgen "
            f"wrote (without base_seed inference-perf picks its sessions by the clock: they cannot be split)"
        ) from None
    if len(stages) != 1:
        raise OutputError(f"{config_path} has {len(stages)} load stages; shard a config with one")
    if not isinstance(seed, int):
        raise OutputError(f"{config_path}: load.base_seed {seed!r} is not an integer; set one")
    for key in ("filter", "duplicate_sessions_target"):
        if replay.get(key) is not None:
            raise OutputError(f"{config_path} sets otel_trace_replay.{key}, which shards cannot split; remove it")
    return stage


def _source(document: ConfigDocument, config_dir: Path, config_path: Path) -> _Source:
    if document.trace_directory:
        return _Source(config_dir, None, (config_dir / document.trace_directory).resolve())
    files = document.local_dataset_file
    if files is None:
        raise OutputError(
            f"{config_path} reads neither a trace_directory nor one local dataset file (hf_dataset_path: "
            f"{{path: json, data_files: FILE}}); regenerate the config with fastgen"
        )
    return _Source(config_dir, (config_dir / files).resolve(), None)


def _row_count(source: _Source, config_path: Path) -> int:
    if source.trace_dir is not None:
        if not source.trace_dir.is_dir():
            raise OutputError(f"{config_path} replays {source.trace_dir}, which is not a folder; generate it first")
        return len(source.trace_files())
    with _Rows(source) as rows:
        return len(rows)


def plan_shards(config_path: Path, count: int, *, base_url: Optional[str] = None) -> list[Shard]:
    """The `count` shards of the config's replay: slots dealt round-robin, each shard's config (module docstring).
    Reads the config and the dataset listing (the trace directory's names, or the dataset file's line ends)."""
    config_path = Path(config_path)
    if not isinstance(count, int) or count < 1:
        raise SpecError(f"--shards {count} is not a shard count; give 1 or more")
    document = _read_config(config_path)
    stage = _shardable_stage(document, config_path)
    source = _source(document, config_path.parent, config_path)
    files = _row_count(source, config_path)
    wanted = stage.get("num_sessions")
    slots = replay_slots(files, document.base_seed, files if wanted is None else int(wanted))
    if count > len(slots):
        raise SpecError(
            f"--shards {count} is more than the {len(slots)} sessions {config_path.name} replays; give at most "
            f"{len(slots)}"
        )
    tokenizer = _tokenizer_folder(document, source.config_dir)
    if base_url:
        document.point_at(base_url)
    return [
        Shard(k, count, tuple(slots[k::count]), _shard_config(document, source, k, count, len(slots)), tokenizer)
        for k in range(count)
    ]


def _tokenizer_folder(document: ConfigDocument, config_dir: Path) -> Optional[Path]:
    """The tokenizer folder the config names (relative to its folder), or None for a hub id."""
    name = document.tokenizer_name
    if isinstance(name, str) and (config_dir / name).is_dir():
        return (config_dir / name).resolve()
    return None


def _shard_config(document: ConfigDocument, source: _Source, k: int, count: int, total: int) -> dict:
    config = ConfigDocument(copy.deepcopy(document.raw))
    share = len(range(k, total, count))
    config.read_dataset_file(source.row_file)
    config.base_seed = _shard_seed(document.base_seed, k)
    stage = config.stage
    stage["num_sessions"] = share
    if stage.get("session_rate") is not None:
        stage["session_rate"] = float(stage["session_rate"]) * share / total
    concurrent = int(stage.get("concurrent_sessions") or 0)
    if concurrent:  # 0 is "all at once": so for every shard
        stage["concurrent_sessions"] = max(1, math.ceil(concurrent * share / total))
    if _tokenizer_folder(document, source.config_dir) is not None:  # copied into the shard; a hub id stays
        config.tokenizer_name = SHARD_TOKENIZER
    # the local reports in the shard's own folder, and every remote path with the shard's own last part: a shared
    # path loses reports (uploaders skip keys that exist; local files are overwritten)
    config.place_reports(".", shard_folder(k))
    return config.raw


def _shard_seed(base_seed: int, k: int) -> int:
    return base_seed * SHARD_SEED_FACTOR + k


def _file_order(shard: Shard) -> list[int]:
    """The shard's slots in the order its dataset file holds them: the order its own seed's shuffle maps back to
    slot order (row order[j] runs at slot j)."""
    order = replay_slots(len(shard.slots), ConfigDocument(shard.config).base_seed, len(shard.slots))
    rows = [0] * len(shard.slots)
    for slot, row in enumerate(order):
        rows[row] = shard.slots[slot]
    return rows


class _Rows:
    """The sessions of a source by file index, as dataset-file rows (bytes ending in a newline)."""

    def __init__(self, source: _Source) -> None:
        self.source = source
        self._mmap: Optional[mmap.mmap] = None
        self._data: bytes | mmap.mmap = b""
        self._ends = np.zeros(0, dtype=np.int64)
        self._files: list[Path] = []

    def __enter__(self) -> "_Rows":
        if self.source.trace_dir is not None:
            self._files = self.source.trace_files()
            return self
        path = self.source.dataset
        assert path is not None
        try:
            if path.name.endswith(ZSTD_SUFFIX):
                self._data = decompress(path.read_bytes(), path)
            elif path.stat().st_size:
                with open(path, "rb") as f:
                    self._mmap = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
                self._data = self._mmap
        except OSError as exc:
            raise OutputError(f"cannot read {path} ({exc.strerror or exc}); generate the dataset first") from None
        self._ends = _line_ends(self._data)
        return self

    def __exit__(self, *exc) -> None:
        if self._mmap is not None:
            self._mmap.close()

    def __len__(self) -> int:
        return len(self._files) if self.source.trace_dir is not None else len(self._ends)

    def row(self, index: int) -> list[bytes | memoryview]:
        if self.source.trace_dir is not None:
            path = self._files[index]
            return row_chunks(f"{self.source.trace_dir.name}/{path.name}", read_trace_bytes(path))
        start, end = int(self._ends[index - 1]) if index else 0, int(self._ends[index])
        row = self._data[start:end]
        return [row] if row.endswith(b"\n") else [row, b"\n"]


def _line_ends(data: bytes | mmap.mmap) -> np.ndarray:
    """The offset just past each line (one session a line), scanned in pieces: a dataset file is gigabytes."""
    size, piece = len(data), 1 << 26
    ends = [
        np.flatnonzero(np.frombuffer(data, np.uint8, count=min(piece, size - at), offset=at) == 10) + (at + 1)
        for at in range(0, size, piece)
    ]
    if size and data[size - 1] != 10:  # a last row without its newline is a row too
        ends.append(np.array([size]))
    return np.concatenate(ends).astype(np.int64) if ends else np.zeros(0, np.int64)


def check_dataset(config_path: Path) -> None:
    """The config's dataset file against the manifest beside it (fastgen's manifest.json records its hash); a
    file the manifest does not list, or with no manifest beside it, is taken as it is."""
    config_path = Path(config_path)
    document = _read_config(config_path)
    _shardable_stage(document, config_path)
    source = _source(document, config_path.parent, config_path)
    if source.dataset is None:
        return
    folder, name = source.dataset.parent, source.dataset.name
    if not (folder / MANIFEST_NAME).is_file():
        return
    entry = read_manifest(folder)["files"].get(name)
    if entry is None:
        return
    expected = listed_record(name, entry, folder / MANIFEST_NAME)
    got = _file_record(source.dataset, name)
    if got != expected:
        raise OutputError(
            f"{source.dataset} is not the file {folder / MANIFEST_NAME} lists (its hash differs); regenerate the "
            f"dataset with fastgen, or run `fastgen verify {folder}`"
        )


def _file_record(path: Path, name: str) -> FileRecord:
    """The record of a file read in pieces (a dataset file is gigabytes)."""
    digest, size = xxhash.xxh3_128(), 0
    try:
        with open(path, "rb") as f:
            while piece := f.read(1 << 24):
                digest.update(piece)
                size += len(piece)
    except OSError as exc:
        raise OutputError(f"cannot read {path} ({exc.strerror or exc}); generate the dataset first") from None
    return FileRecord(name, size, digest.hexdigest())


def write_shards(config_path: Path, count: int, out_dir: Path, *, base_url: Optional[str] = None) -> list[Path]:
    """Each shard of the config into out_dir/shard-{k:02d}/: its config (the config's file name), its dataset file and
    its copy of the tokenizer folder, with a manifest of them in out_dir; the config paths, in shard order. All or
    nothing: on any error out_dir is left as it was (a previous export of shards in it is replaced whole)."""
    config_path = Path(config_path)
    shards = plan_shards(config_path, count, base_url=base_url)
    check_dataset(config_path)
    document = _read_config(config_path)
    _shardable_stage(document, config_path)
    source = _source(document, config_path.parent.resolve(), config_path)
    staging = open_staging(Path(out_dir), option="--out")
    try:
        records = _stage_shards(shards, source, staging.folder, config_path)
        rewrite_files(
            staging.folder,
            {
                "generator": GENERATOR,
                "format_version": SHARDS_FORMAT,
                "shard_count": len(shards),
                "source_config": config_path.name,
            },
            records,
        )
        place_all([staging])
    except BaseException:
        discard(staging)
        raise
    return [staging.out / shard.name / config_path.name for shard in shards]


def _stage_shards(shards: list[Shard], source: _Source, folder: Path, config_path: Path) -> list:
    writer = SessionWriter(folder, None)
    records = []
    with _Rows(source) as rows:
        for shard in shards:
            (folder / shard.name).mkdir()
            order = _file_order(shard)
            records.append(writer.stream(f"{shard.name}/{source.row_file}", _chunks(rows, order)))
            text = _config_text(shard, config_path)
            target = folder / shard.name / config_path.name
            try:
                write_atomically(target, text)
            except OSError as exc:
                why = exc.strerror or exc
                raise OutputError(f"cannot write {target}: {why}; free space or choose another --out") from None
            records.append(record(f"{shard.name}/{config_path.name}", text.encode()))
            records += _copy_tokenizer(shard, folder)
    return records


def _copy_tokenizer(shard: Shard, folder: Path) -> list[FileRecord]:
    """The tokenizer folder into the shard (its config names it SHARD_TOKENIZER), with a record of each file."""
    if shard.tokenizer is None:
        return []
    target = folder / shard.name / PurePosixPath(SHARD_TOKENIZER).name
    try:
        shutil.copytree(shard.tokenizer, target)
    except OSError as exc:
        raise OutputError(
            f"cannot copy {shard.tokenizer} into {target} ({exc}); free space or choose another --out"
        ) from None
    return _folder_records(target, folder)


def _folder_records(target: Path, folder: Path) -> list[FileRecord]:
    return [
        record(path.relative_to(folder).as_posix(), path.read_bytes())
        for path in sorted(target.rglob("*"))
        if path.is_file()
    ]


def _chunks(rows: _Rows, order: list[int]) -> Iterator[list[bytes | memoryview]]:
    for index in order:
        yield rows.row(index)


def _config_text(shard: Shard, config_path: Path) -> str:
    document = ConfigDocument(shard.config)
    head = (
        f"# shard {shard.index + 1} of {shard.count} of {config_path.name} (fastgen export shards): "
        f"{document.stage['num_sessions']} of its sessions, load.base_seed {document.base_seed};\n"
        f"# every path here is relative to this folder, reports included: copy the folder anywhere, then from inside\n"
        f"# it run: inference-perf --config_file {config_path.name}\n"
    )
    return head + yaml.safe_dump(shard.config, sort_keys=False, default_flow_style=False, allow_unicode=True)
