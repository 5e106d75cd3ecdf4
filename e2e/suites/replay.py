"""Run the real inference-perf on one config, the way a user would: from the config's folder, with a time limit.

Its output goes to a log file, not the console: a run prints several screens of tables.
"""

from __future__ import annotations

from pathlib import Path

from fastgen.bakeoff import inference_perf_command
from fastgen.bakeoff.inference_perf import run_inference_perf as _run

__all__ = ["run_inference_perf"]


def run_inference_perf(config: Path, *, log: Path, timeout_s: float) -> int:
    """inference-perf's exit code; 124 (like timeout(1)) when it ran past timeout_s and was stopped. `datasets`'
    cache of the dataset files (hf_dataset_path) is kept beside the log, never in the user's ~/.cache."""
    config = Path(config).resolve()
    log.parent.mkdir(parents=True, exist_ok=True)
    return _run(inference_perf_command(), config, config.parent, log, timeout_s, cache=log.parent / ".datasets-cache")
