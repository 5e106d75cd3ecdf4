"""The optional extras of pyproject.toml ([project.optional-dependencies]) and the one way fastgen reaches them.

A command that needs an extra calls `require_extra` before it reads any file, so that a missing one is one line that
names the command, the extra and the pip command, never a verdict on the user's data. Code that imports an extra's
module itself does it through `import_extra`, which raises the same error. Nothing here imports the extras.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
from types import ModuleType
from typing import NamedTuple

from .errors import MissingExtraError

__all__ = ["EXTRAS", "import_extra", "missing_extra", "require_extra"]


class Needs(NamedTuple):
    module: str  # what is imported
    distribution: str  # what pip installs it as
    version: str = ""  # the version prefix fastgen was written against ("": any)


# extra -> what it brings that fastgen imports (pyproject.toml's pins: inference-perf 0.7.0, which needs Python 3.12)
EXTRAS: dict[str, tuple[Needs, ...]] = {
    "validate": (Needs("inference_perf", "inference-perf", "0.7."),),
    "bakeoff": (Needs("inference_perf", "inference-perf", "0.7."), Needs("prometheus_client", "prometheus_client")),
    "plots": (Needs("matplotlib", "matplotlib"),),
}
_PYTHON = {"validate": " (Python 3.12)", "bakeoff": " (Python 3.12)"}


def _message(extra: str, command: str, found: str = "") -> str:
    return f"{command} needs the {extra} extra{found}: pip install 'fastgen[{extra}]'{_PYTHON.get(extra, '')}"


def _problem(needs: Needs) -> str | None:
    """None when the module is importable at the version fastgen reads; else what is there instead ("" for nothing)."""
    try:
        if importlib.util.find_spec(needs.module) is None:
            return ""
    except (ImportError, ValueError):  # a parent package that is not there, or a module set to None
        return ""
    if not needs.version:
        return None
    try:
        version = importlib.metadata.version(needs.distribution)
    except importlib.metadata.PackageNotFoundError:
        return ""
    return None if version.startswith(needs.version) else f"{needs.distribution} {version}"


def missing_extra(extra: str, command: str) -> str | None:
    """Why `command` cannot do what needs `extra` here (one line), or None when the extra is installed."""
    for needs in EXTRAS[extra]:
        found = _problem(needs)
        if found is not None:
            wanted = f"{needs.distribution} {needs.version}x"
            return _message(extra, command, f" ({wanted}, not {found})" if found else "")
    return None


def require_extra(extra: str, command: str) -> None:
    """MissingExtraError unless `extra` is installed: call it before any file is read."""
    reason = missing_extra(extra, command)
    if reason is not None:
        raise MissingExtraError(reason)


def import_extra(module: str, *, extra: str, command: str) -> ModuleType:
    """`module` (e.g. "prometheus_client.parser"), which `extra` brings; MissingExtraError when it cannot be
    imported."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise MissingExtraError(_message(extra, command)) from exc
