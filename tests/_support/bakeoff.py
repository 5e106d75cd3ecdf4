"""Helpers the bakeoff tests share: a fake engine in its own process, `fastgen bakeoff` against it, a run's record."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from e2e.suites.bakeoff import FakeEngineProcess
from e2e.suites.runner import fastgen_command

QUICK = "scenario2/c10_sync"  # 12 requests, about 6 s


MODEL = "meta-llama/Llama-3.3-70B-Instruct"


def engine(dataset: Path, tmp_path: Path, flavour: str = "vllm", *extra: str, **kwargs) -> FakeEngineProcess:
    return FakeEngineProcess(
        dataset / "traces" / "tokenizer", tmp_path / "engine.jsonl", flavour, extra=tuple(extra), **kwargs
    )


def bakeoff(dataset: Path, tmp_path: Path, url: str, *args: str) -> subprocess.CompletedProcess:
    return fastgen_command(
        "bakeoff",
        "--url",
        url,
        "--label",
        "x",
        "--config-dir",
        str(dataset / "configs"),
        "--out",
        str(tmp_path / "reports"),
        "--scrape-interval",
        "0.5",
        *args,
        timeout_s=600,
    )


def run_record(tmp_path: Path, name: str, repeat: int = 1) -> dict:
    return json.loads((tmp_path / "reports" / "x" / name / f"repeat-{repeat}" / "run.json").read_text())
