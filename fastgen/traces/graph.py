"""inference-perf 0.7.0's own reading of a trace file: its graph builder, run the way the replay runs it.

Everything that reads traces as the replay will (validate, analyze, export) goes through here, so they agree with
inference-perf and with each other, on any OTel corpus it reads, not only fastgen's. The import is deferred: it
takes seconds, and `fastgen` without the [validate] extra must still work.
"""

from __future__ import annotations

import functools
import json
import logging
import logging.handlers
import os
from pathlib import Path

import orjson

from ..formats.compression import read_trace_bytes
from ..extras import import_extra, require_extra

__all__ = [
    "READERS",
    "build_graph",
    "filter_duplicate_spans",
    "graph_api",
    "quiet_transformers",
    "read_trace",
    "trace_files",
]

READERS = "reading traces as inference-perf does"  # what needs the validate extra, for its message
_GRAPH_MODULE = "inference_perf.datagen.replay.otel_trace_to_replay_graph"
TRACE_SUFFIXES = (".json", ".json.zst")


def quiet_transformers() -> None:
    """inference-perf imports transformers, which prints a banner to stderr without PyTorch: that banner would be
    the first line of fastgen's one-line errors."""
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")


@functools.cache
def _checked_version() -> None:
    require_extra("validate", READERS)  # once a process: it reads the installed version's metadata


def graph_api():
    # The contract (docs/inference-perf-contract.md) was read off 0.7.0; other versions build graphs differently.
    quiet_transformers()
    api = import_extra(_GRAPH_MODULE, extra="validate", command=READERS)
    _checked_version()
    return api


def read_trace(path: Path) -> dict:
    """A trace file (.json or .json.zst) as inference-perf's loader needs it: an object with a `spans` list."""
    data = read_trace_bytes(path)
    try:
        doc = orjson.loads(data)  # several times faster on these files
    except orjson.JSONDecodeError:  # what orjson refuses and inference-perf's json.load reads (NaN, huge ints)
        doc = json.loads(data)
    if not isinstance(doc, dict) or not isinstance(doc.get("spans"), list):
        raise ValueError("top level is not an object with a 'spans' list")
    return doc


def trace_files(folder: Path) -> list[Path]:
    """The files of one trace directory in inference-perf's order (sorted names, not recursive); a .json.zst stands
    for the .json it unpacks to."""
    return sorted(
        (p for p in Path(folder).iterdir() if p.is_file() and p.name.endswith(TRACE_SUFFIXES)),
        key=lambda p: p.name.removesuffix(".zst"),
    )


def filter_duplicate_spans(spans: list[dict]) -> list[dict]:
    """inference-perf's filter_duplicate_spans, the same spans kept in the same order, without its json.dumps
    (sort_keys) of every span's attributes, which hold the span's whole message history: those were a fifth of
    reading a fastgen trace file. Spans are told apart by an orjson signature first; only spans that share one (no
    fastgen trace has any) are compared by inference-perf's own signature, so the result is always its result."""
    kept: dict[bytes, list[dict]] = {}
    unique = []
    for span in sorted(spans, key=lambda s: s["span_id"]):  # inference-perf's order
        try:
            key = orjson.dumps(span.get("attributes", {}), option=orjson.OPT_SORT_KEYS)
        except TypeError:  # what orjson cannot write (ints past 64 bits): compared the exact way below
            key = b""
        key = f"{span.get('start_time', '')}|{span.get('end_time', '')}|".encode() + key
        alike = kept.setdefault(key, [])
        if alike and _exact_signature(span) in {_exact_signature(other) for other in alike}:
            continue
        alike.append(span)
        unique.append(span)
    return unique


def _exact_signature(span: dict) -> str:
    attributes = json.dumps(span.get("attributes", {}), sort_keys=True, ensure_ascii=False)
    return f"{span.get('start_time', '')}|{span.get('end_time', '')}|{attributes}"


def build_graph(doc: dict, path: Path):
    """(the ReplayGraph, inference-perf's warnings): the replay's own sequence (`_process_trace_data`); the
    warnings come back as lines instead of log noise."""
    api = graph_api()
    spans = doc["spans"]
    collect, logger = logging.handlers.BufferingHandler(capacity=1 << 30), api.logger  # never flushes: a plain list
    collect.setLevel(logging.WARNING)
    logger.addHandler(collect)
    # Captured even when the caller's logging is quieter than WARNING, and kept off the console either way.
    saved = logger.propagate, logger.level, api.filter_duplicate_spans
    logger.propagate, logger.level = False, logging.WARNING
    api.filter_duplicate_spans = filter_duplicate_spans  # build_raw_calls looks it up in its module at each call
    try:
        calls, _ = api.build_raw_calls(spans, include_errors=True)  # the config default, not the function's
        graph = api.build_graph(calls, source_file=str(path))
        api.tag_user_facing_events(graph, all_spans=spans)
    finally:
        logger.removeHandler(collect)
        logger.propagate, logger.level, api.filter_duplicate_spans = saved
    return graph, [record.getMessage() for record in collect.buffer]
