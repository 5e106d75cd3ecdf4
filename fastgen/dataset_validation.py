"""`fastgen validate` as library calls: a dataset's trace files through validate's graph checks, against the shapes
the workload its manifest records plans for each trace directory (the benchmark's default workload's where there is
no manifest).

validate is the read side and imports no generator; the plans' shapes come from the generator (expectations.py).
This module, above both, hands them in, as the command does.
"""

from __future__ import annotations

from pathlib import Path

from .formats.manifest import MANIFEST_NAME
from .generator.expectations import expected_shapes
from .validate import FileReport, Shapes
from .validate import check_file_against
from .validate import describe_file as _describe_file
from .validate import validate_tree_against

__all__ = ["check_file", "describe_file", "shapes_of_file", "shapes_of_tree", "validate_tree"]


def shapes_of_tree(root: Path) -> Shapes:
    """The shapes of a dataset folder's trace directories; a scenario folder's dataset is the folder above it."""
    root = Path(root)
    return expected_shapes(root if (root / MANIFEST_NAME).is_file() else root.parent)


def shapes_of_file(path: Path) -> Shapes:
    """The shapes of the dataset a trace file is in: two folders up (dataset/scenario/session_NNNN.json)."""
    return expected_shapes(Path(path).parent.parent)


def validate_tree(root: Path, *, workers: int | None = None, progress: bool = False) -> list[FileReport]:
    """Every session file under root's trace directories (or in root itself) against its dataset's shapes, checked
    in parallel, sorted by path."""
    return validate_tree_against(root, shapes_of_tree(root), workers=workers, progress=progress)


def check_file(path: Path) -> FileReport:
    """One trace file (.json or .json.zst) against its dataset's shapes."""
    return check_file_against(path, shapes_of_file(path))


def describe_file(path: Path) -> str:
    """The --verbose view of one file (every event as inference-perf sees it), against its dataset's shapes."""
    return _describe_file(path, shapes_of_file(path))
