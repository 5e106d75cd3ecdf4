"""fastgen's exceptions. Only the CLI turns them into exit codes and one-line messages.

FastgenError
├── SpecError          a number or option out of range, a spec that cannot fit the context window
│   └── WorkloadError  a workload file that does not load: YAML, keys, types, ranges, format version
├── TokenizerError     a tokenizer that cannot be found or loaded
├── OutputError        an output folder that fastgen may not write into, or a failed write
├── ValidationError    inference-perf's graph (or a config) deviates from the scenario's shape
├── ServerError        a live server that cannot be reached, serves another model, or refuses a reset
└── MissingExtraError  a command whose optional extra (fastgen[validate], [bakeoff], [plots]) is not installed
"""

from __future__ import annotations

__all__ = [
    "FastgenError",
    "SpecError",
    "WorkloadError",
    "TokenizerError",
    "OutputError",
    "ValidationError",
    "ServerError",
    "MissingExtraError",
]


class FastgenError(Exception):
    """Base class: the message is one line that names the problem and the fix."""


class SpecError(FastgenError, ValueError):
    """A ValueError too, so that a spec's own checks read as validation errors when a workload file is loaded."""


class WorkloadError(SpecError):
    pass


class TokenizerError(FastgenError):
    pass


class OutputError(FastgenError):
    pass


class ValidationError(FastgenError):
    pass


class ServerError(FastgenError):
    pass


class MissingExtraError(FastgenError):
    """Raised by fastgen.extras before any file is read: the message names the command, the extra and the pip line."""
