"""The session-per-row dataset file of a trace directory: one JSON line per trace file, for inference-perf's
`hf_dataset_path` source.

With `trace_directory`, inference-perf 0.7.0 json-parses every file and builds an in-memory Arrow table in the parent
before its workers fork (scenario3 at c500: 30 s to the first request, 8.4 GB PSS). Through
`hf_dataset_path: {path: json, data_files: FILE}` the `datasets` library converts the file to a memory-mapped Arrow
cache once, and inference-perf reads one row when it builds that session. A row gives the same session as the file:

- rows are in sorted file-name order, the order of `sorted(dir.glob("*.json"))`, so the shuffle by `load.base_seed`
  assigns every session the same slot and the same runtime id `trace{slot}_{session_id}`;
- `session_id` is the file's own (inference-perf prefers it to the file name); `source_id` names the file, as
  inference-perf's own `source_id` (the file's path) does: it is the graph's `source_file`, never sent.

A row is the file's bytes with `"source_id"` spliced in after the opening brace: no parse, no re-serialisation, so
every attribute is byte for byte what the file holds.
"""

from __future__ import annotations

import random
from typing import Callable, Mapping

import orjson

from ..errors import OutputError
from .config_dialect import replay_source

__all__ = [
    "DATASET_SUFFIX",
    "dataset_file",
    "reading_trace_directory",
    "replay_slots",
    "row_chunks",
    "trace_dir_of",
    "with_source_paths",
]

DATASET_SUFFIX = ".jsonl"


def dataset_file(trace_dir: str) -> str:
    """The dataset file of a trace directory, beside it: `scenario1` -> `scenario1.jsonl`."""
    return trace_dir.rstrip("/") + DATASET_SUFFIX


def replay_slots(file_count: int, base_seed: int, num_sessions: int) -> list[int]:
    """File index (in sorted order, the dataset file's row) of each slot that runs: inference-perf's shuffle, then
    the first N."""
    order = list(range(file_count))
    random.Random(base_seed).shuffle(order)  # the same sequence as random.seed(base_seed); random.shuffle(order)
    return order[: min(num_sessions, file_count)]


def trace_dir_of(replay: Mapping) -> str:
    """The trace directory a config's otel_trace_replay section reads, as the config writes it: its
    `trace_directory`, or the folder its dataset file (`hf_dataset_path`'s `data_files`) sits beside. KeyError when
    it names neither (not a config fastgen wrote)."""
    if "trace_directory" in replay:
        return replay["trace_directory"]
    files = _data_files(replay)
    name = files.removesuffix(".zst")
    if not name.endswith(DATASET_SUFFIX):
        raise KeyError("trace_directory")
    return name[: -len(DATASET_SUFFIX)]


def with_source_paths(replay: dict, change: Callable[[str], str]) -> dict:
    """The section with its trace directory or dataset file path changed by `change` (made absolute, say)."""
    if "trace_directory" in replay:
        return {**replay, "trace_directory": change(replay["trace_directory"])}
    source = dict(replay["hf_dataset_path"])
    source["data_files"] = change(_data_files(replay))
    return {**replay, "hf_dataset_path": source}


def reading_trace_directory(config: Mapping) -> dict:
    """An inference-perf config (the parsed document) that reads a trace directory's dataset file, as the same config
    reading the trace directory itself, what `fastgen --source traces` writes. A new document: the caller's is left
    alone, its other sections shared, not copied. KeyError where its otel_trace_replay names neither source (not a
    config fastgen wrote)."""
    replay = config["data"]["otel_trace_replay"]
    source = replay_source("traces", {"traces": trace_dir_of(replay)})
    rest = {key: value for key, value in replay.items() if key not in ("hf_dataset_path", "trace_directory")}
    return {**config, "data": {**config["data"], "otel_trace_replay": {**source, **rest}}}


def _data_files(replay: Mapping) -> str:
    source = replay["hf_dataset_path"]  # KeyError: neither source
    files = source.get("data_files") if isinstance(source, Mapping) and source.get("path") == "json" else None
    if not isinstance(files, str):
        raise KeyError("hf_dataset_path.data_files")
    return files


def row_chunks(source_id: str, trace: bytes) -> list[bytes | memoryview]:
    """One line of the dataset file: the trace file's object with `source_id` first. The trace must be one compact
    JSON object on one line (orjson's output, which escapes every newline inside strings). The trace's bytes are
    not copied (a view): the default set's rows are 2.6 GB."""
    body = trace.rstrip(b"\n")
    if not body.startswith(b"{") or b"\n" in body:
        raise OutputError(f"{source_id} is not a one-line JSON object; regenerate the dataset")
    head = b'{"source_id":' + orjson.dumps(source_id) + (b"," if body != b"{}" else b"")
    return [head, memoryview(body)[1:], b"\n"]
