"""One JSON document a line into a file the user named, whole or not at all: what every export writes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterable

from ..errors import OutputError
from ..formats.atomic import atomic_open

__all__ = ["write_jsonl"]


def write_jsonl(lines: Iterable[dict], out: Path) -> None:
    """The lines into `out` through a temporary file beside it: a failed or interrupted write leaves no partial file
    and the old `out`, if any, as it was."""
    out = Path(out)
    try:
        with atomic_open(out) as f:
            for line in lines:
                f.write((json.dumps(line, separators=(",", ":")) + "\n").encode("utf-8"))
    except OSError as exc:
        raise OutputError(f"cannot write {out}: {exc.strerror or exc}; choose another --out") from None
