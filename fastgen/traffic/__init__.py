"""Traffic as measured from trace files: every request's counts, times, shape and prefix sharing, read from
OpenTelemetry GenAI spans (the files fastgen writes and inference-perf reads) or Mooncake-style JSON lines, and the
statistics published measurements of coding agents give (stats.py). No prompt text is kept: only counts, timings,
shapes and hashes of prefixes."""

from .read import Request, read_traffic
from .stats import PUBLISHED, Statistic, fidelity_table, traffic_stats

__all__ = ["PUBLISHED", "Request", "Statistic", "fidelity_table", "read_traffic", "traffic_stats"]
