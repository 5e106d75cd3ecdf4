"""One JSON document a line into a file the user named, whole or not at all: what every export writes."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Iterable

from ..errors import OutputError

__all__ = ["write_jsonl"]


def write_jsonl(lines: Iterable[dict], out: Path) -> None:
    """The lines into `out` through a temporary file beside it: a failed or interrupted write leaves no partial file
    and the old `out`, if any, as it was."""
    out = Path(out)
    temp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    try:
        with open(temp, "w", encoding="utf-8") as f:
            for line in lines:
                f.write(json.dumps(line, separators=(",", ":")) + "\n")
        os.replace(temp, out)
    except OSError as exc:
        temp.unlink(missing_ok=True)
        raise OutputError(f"cannot write {out}: {exc.strerror or exc}; choose another --out") from None
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
