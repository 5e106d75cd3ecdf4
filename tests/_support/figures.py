"""The figures the docs quote, read back from the page, and what a generated folder measures: a test compares the
two, so a page cannot keep a size the code no longer writes."""

from __future__ import annotations

import re
from pathlib import Path

from _support import ROOT


def quoted(page: str, pattern: str) -> tuple[str, ...]:
    """The groups of `pattern` in docs/`page` (one match, the page's whitespace and line breaks read as one space);
    AssertionError naming the page when the sentence is not there."""
    text = re.sub(r"\s+", " ", (ROOT / "docs" / page).read_text())
    found = re.findall(pattern, text)
    assert len(found) == 1, f"docs/{page} no longer says {pattern!r} once (found {found})"
    return found[0] if isinstance(found[0], tuple) else (found[0],)


def trace_and_dataset_bytes(trace_root: Path) -> tuple[int, int]:
    """(the trace files' bytes, the dataset files' bytes) of a generated trace folder: its scenario directories'
    files, and the `<trace dir>.jsonl` beside each (the tokenizer and the manifest are neither)."""
    traces = sum(p.stat().st_size for d in trace_root.iterdir() if d.is_dir() and d.name != "tokenizer"
                 for p in d.rglob("*") if p.is_file())  # fmt: skip
    datasets = sum(p.stat().st_size for p in trace_root.glob("*.jsonl"))
    return traces, datasets
