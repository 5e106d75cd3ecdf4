"""Two servers' runs, read and compared: what the benchmark's questions come to, side by side."""

from .compare import Comparison, compare_runs
from .report import CompareOptions
from .runs import ConfigRun, Repeat, RequestRecord, SessionRecord, read_runs

__all__ = [
    "CompareOptions",
    "Comparison",
    "ConfigRun",
    "Repeat",
    "RequestRecord",
    "SessionRecord",
    "compare_runs",
    "read_runs",
]
