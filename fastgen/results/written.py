"""What compare wrote into its --out folder, so that it never overwrites a file it did not write (or one edited
since): a hidden record of the sha256 of each file it wrote. A report.md, report.json or plot that is not in the
record with its current bytes is refused; with --force it is moved aside (NAME.edited, never deleted) and the new one
written."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from ..errors import OutputError
from ..formats.atomic import write_atomically

__all__ = ["RECORD", "WrittenFiles"]

RECORD = ".fastgen-compare.json"


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


class WrittenFiles:
    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder)
        try:
            record = json.loads((self.folder / RECORD).read_text(encoding="utf-8"))
            self.files = {str(k): str(v) for k, v in record.get("files", {}).items()}
        except (OSError, ValueError, AttributeError):
            self.files = {}

    def _ours(self, name: str) -> bool:
        path = self.folder / name
        return not path.exists() or (path.is_file() and self.files.get(name) == _sha256(path))

    def clear(self, names: list[str], *, force: bool) -> list[str]:
        """Make room for these files: refuse (OutputError) on the first one compare did not write, or with force
        move each such file aside; the names it was moved to."""
        foreign = [name for name in names if not self._ours(name)]
        if foreign and not force:
            raise OutputError(
                f"{self.folder / foreign[0]} was not written by fastgen compare (or was edited since); "
                f"move it away, choose another --out, or pass --force to keep it as "
                f"{foreign[0]}.edited and write the new one"
            )
        moved = []
        for name in foreign:
            target = self.folder / f"{name}.edited"
            number = 1
            while target.exists():
                number += 1
                target = self.folder / f"{name}.edited-{number}"
            os.replace(self.folder / name, target)
            moved.append(target.name)
        return moved

    def wrote(self, name: str) -> None:
        """Remember a file just written (its bytes as they are now)."""
        self.files[name] = _sha256(self.folder / name)
        write_atomically(
            self.folder / RECORD, json.dumps({"format": 1, "files": dict(sorted(self.files.items()))}, indent=1) + "\n"
        )
