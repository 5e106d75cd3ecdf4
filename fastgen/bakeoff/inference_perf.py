"""inference-perf as a process: its command, one run or several at once (a run's shards), each in its own process
group so that stopping it stops its forked load workers, the stage each is at read from its log, a timeout."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, Optional

from ..extras import require_extra

__all__ = ["inference_perf_command", "inference_perf_env", "run_inference_perf", "run_inference_perf_all"]

_POLL_S = 0.5


def inference_perf_command() -> list[str]:
    """inference-perf's console script beside this interpreter (a venv's bin/), else `python -m inference_perf`."""
    script = Path(sys.executable).with_name("inference-perf")
    if script.exists():
        return [str(script)]
    require_extra("bakeoff", "fastgen bakeoff")
    return [sys.executable, "-m", "inference_perf"]


# inference-perf's log lines that tell where a run is
_STAGES = (
    ("Loading tokenizer", "loading the tokenizer"),
    ("Schema validation passed", "loading the traces"),
    ("session-based run started", "replaying"),
    ("sessions completed", "sessions done"),
    ("Generating Reports", "writing reports"),
)


def inference_perf_env(cache: Optional[Path] = None) -> dict[str, str]:
    """The environment inference-perf runs in: quiet, offline for `datasets` (a dataset file is local: nothing to
    fetch), with `cache` as its cache folder (HF_DATASETS_CACHE; None: its default)."""
    env = {**os.environ, "TRANSFORMERS_VERBOSITY": "error", "TOKENIZERS_PARALLELISM": "false"}
    env["HF_DATASETS_OFFLINE"] = "1"
    if cache is not None:
        env["HF_DATASETS_CACHE"] = str(Path(cache).resolve())
    return env


def run_inference_perf(
    command: list[str],
    config: Path,
    cwd: Path,
    log: Path,
    timeout_s: Optional[float],
    stage: Callable[[str], None] = lambda line: None,
    *,
    cache: Optional[Path] = None,
) -> int:
    """inference-perf's exit code, its output in `log`; 124 when it ran past timeout_s and was stopped (like
    timeout(1)). `stage` hears where the run is, from its log, twice a second. `config` and `log` are made absolute
    here: inference-perf runs from `cwd`. `cache`: `datasets`' cache folder (HF_DATASETS_CACHE; None: its default),
    used offline (a dataset file is local: nothing to fetch)."""
    return run_inference_perf_all(command, [(config, cwd, log)], timeout_s, stage, cache=cache)[0]


def run_inference_perf_all(
    command: list[str],
    runs: list[tuple[Path, Path, Path]],
    timeout_s: Optional[float],
    stage: Callable[[str], None] = lambda line: None,
    *,
    cache: Optional[Path] = None,
) -> list[int]:
    """run_inference_perf for several (config, cwd, log) at once (the shards of one run): each one's exit code, 124
    for those still running at timeout_s. Stopping one stops none of the others; Ctrl-C stops all."""
    env = inference_perf_env(cache)
    started = time.monotonic()
    procs: list[subprocess.Popen] = []
    codes: list[Optional[int]] = [None] * len(runs)
    try:
        watchers = []
        for config, cwd, log in runs:
            log = Path(log).resolve()
            with open(log, "wb") as out:
                # its own process group: inference-perf forks load workers, and stopping it must stop all of them
                procs.append(
                    subprocess.Popen(
                        [*command, "--config_file", str(Path(config).resolve())],
                        cwd=cwd,
                        stdout=out,
                        stderr=subprocess.STDOUT,
                        env=env,
                        start_new_session=True,
                    )
                )
            watchers.append(_LogWatcher(log))
        while True:
            codes = [proc.poll() for proc in procs]
            if all(code is not None for code in codes):
                return [int(code) for code in codes if code is not None]
            time.sleep(_POLL_S)
            elapsed = time.monotonic() - started
            where = "; ".join(w.stage() for w, code in zip(watchers, codes) if code is None)
            stage(f"{where}, {elapsed:.0f} s")
            if timeout_s is not None and elapsed > timeout_s:
                for proc, code in zip(procs, codes):
                    if code is None:
                        _kill(proc)
                return [124 if code is None else code for code in codes]
    except BaseException:
        for proc in procs:
            _kill(proc)
        raise


def _kill(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


class _LogWatcher:
    """The stage of a run from the new lines of its log, and how many sessions have been dispatched."""

    def __init__(self, log: Path) -> None:
        self._log, self._offset, self._stage, self._sessions = log, 0, "starting inference-perf", 0

    def stage(self) -> str:
        try:
            with open(self._log, "rb") as f:
                f.seek(self._offset)
                chunk = f.read()
        except OSError:
            return self._stage
        end = chunk.rfind(b"\n") + 1
        self._offset += end
        for line in chunk[:end].decode("utf-8", "replace").splitlines():
            self._sessions += "Dispatching session" in line
            for marker, name in _STAGES:
                if marker in line:
                    self._stage = name
        if self._stage == "replaying" and self._sessions:
            return f"replaying, {self._sessions} sessions started"
        return self._stage
