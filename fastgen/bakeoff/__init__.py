"""Runs against a live server: reset its prefix cache, sample its /metrics, replay each config with inference-perf.

The run folders it writes (runs.py) are what `fastgen.results` reads.
"""

from .runner import BakeoffOptions, RunOutcome, inference_perf_command, run_bakeoff

__all__ = ["BakeoffOptions", "RunOutcome", "inference_perf_command", "run_bakeoff"]
