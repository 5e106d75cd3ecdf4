"""Runs against a live server: reset its prefix cache, sample its /metrics, replay each config with inference-perf.

The run folders it writes (runs.py) are what `fastgen.results` reads.
"""

from .inference_perf import inference_perf_command
from .runner import BakeoffOptions, RunOutcome, run_configs

__all__ = ["BakeoffOptions", "RunOutcome", "inference_perf_command", "run_configs"]
