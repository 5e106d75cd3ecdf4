"""Two servers' runs, read and compared: what the benchmark's questions come to, side by side."""

from .compare import Comparison, compare_runs
from .runs import ConfigRun, RequestRecord, SessionRecord, read_runs

__all__ = ["Comparison", "ConfigRun", "RequestRecord", "SessionRecord", "compare_runs", "read_runs"]
