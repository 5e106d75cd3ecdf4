"""Run the real inference-perf on one config, the way a user would: from the config's folder, with a time limit.

Its output goes to a log file, not the console: a run prints several screens of tables.
"""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

from fastgen.bakeoff import inference_perf_command

__all__ = ["run_inference_perf"]


def run_inference_perf(config: Path, *, log: Path, timeout_s: float) -> int:
    """inference-perf's exit code; 124 (like timeout(1)) when it ran past timeout_s and was stopped."""
    config = Path(config).resolve()
    log.parent.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "TRANSFORMERS_VERBOSITY": "error", "TOKENIZERS_PARALLELISM": "false"}
    with open(log, "wb") as out:
        # Its own process group: inference-perf forks load workers, and a timeout must stop all of them.
        proc = subprocess.Popen([*inference_perf_command(), "--config_file", config.name], cwd=config.parent,
                                stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        try:
            return proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            return 124
        except BaseException:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            raise

