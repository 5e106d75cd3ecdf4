"""What the command-line tests share: fastgen run with its own environment, the output options, and the one-line
error with nothing written."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def _fastgen_env(*args: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess:
    # conftest's run_fastgen inherits the environment; the default-tokenizer case needs its own HF cache.
    return subprocess.run(
        [sys.executable, "-m", "fastgen", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**os.environ, **env},
        timeout=600,
    )


def _paths(tmp_path: Path) -> list[str]:
    return ["--output-dir", str(tmp_path / "traces"), "--config-dir", str(tmp_path / "configs")]


def _one_error_line(result) -> str:
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("fastgen: error: "), lines[0]
    return lines[0]


def _assert_nothing_written(tmp_path: Path) -> None:
    assert not (tmp_path / "traces").exists()
    assert not (tmp_path / "configs").exists()
    assert not [p for p in tmp_path.iterdir() if ".fastgen-" in p.name]
