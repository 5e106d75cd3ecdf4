"""Shared fixtures: a scaled-down dataset made by the real `fastgen` command in a real process."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from fastgen.tokenizer import load_tokenizer

# No test reaches beyond loopback: a hub id that is not cached is looked for at a closed local port (refused at once).
os.environ["HF_ENDPOINT"] = "http://127.0.0.1:9"
os.environ["HF_HUB_DISABLE_TELEMETRY"] = "1"

# A suite started in the background of a shell without job control inherits SIGINT ignored, and so would every
# command a test starts (Python installs no Ctrl-C handler then): the Ctrl-C tests would test nothing. Restore it;
# a handled signal is reset to the default on exec, so the children start as from a terminal.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

# Few sessions and small budgets, same structure: the whole suite stays within minutes on 2 cores.
SMALL = ["--scale", "0.04", "--budget-scale", "0.05", "--tokenizer", "builtin", "--quiet"]


def run_fastgen(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "fastgen", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=600)


@pytest.fixture(scope="session")
def builtin():
    return load_tokenizer("builtin")


@pytest.fixture(scope="session")
def small_dataset(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("small")
    result = run_fastgen(*SMALL, "--workers", "2", "--output-dir", str(root / "traces"),
                         "--config-dir", str(root / "configs"))
    assert result.returncode == 0, result.stderr
    # --quiet means silent: nothing from the forked worker pools either (warnings, stray output).
    assert result.stderr == "", result.stderr
    return root


def trace_files(traces: Path) -> list[Path]:
    return sorted(traces.glob("scenario*/session_*.json"))


def load_spans(path: Path) -> list[dict]:
    return json.loads(path.read_bytes())["spans"]
