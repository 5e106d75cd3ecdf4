"""Shared fixtures: a scaled-down dataset made by the real `fastgen` command in a real process."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from _support import ROOT
from fastgen.formats.tokenizer import load_tokenizer

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


# Slow tests (10-120 s each: replays through the real inference-perf against fake engines, the benchmarks) are marked
# on the test, `@pytest.mark.slow` (or a module's `pytestmark`). `make test` leaves them out (-m "not slow"),
# `make test-slow` runs them alone; CI runs both. A test that starts inference-perf or a benchmark gets the mark.


def write_sessions(tokenizer, spec, root: Path, *, seed: int = 7) -> list[tuple[Path, list[dict]]]:
    """(path, spans) of every session of each scenario of the spec, written under root as the generator writes
    them."""
    from fastgen.generator.dataset import DatasetBuilder, Task
    from fastgen.generator.scenarios import in_spec

    builder = DatasetBuilder(tokenizer, spec, seed=seed, model="m")
    out = []
    for scenario in in_spec(spec):
        for index in range(scenario.spec(spec).count):
            for rel, data in builder.files_for(Task(scenario.id, index)):
                path = root / rel
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(data)
                out.append((path, json.loads(data)["spans"]))
    return out


def run_fastgen(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "fastgen", *args], capture_output=True, text=True, cwd=cwd, timeout=600
    )


@pytest.fixture(scope="session", autouse=True)
def _pool_cache_folder(tmp_path_factory):
    """fastgen keeps prepared content pools in the user's cache folder (XDG_CACHE_HOME): the suite's runs share a
    folder of their own instead, never the user's."""
    os.environ["XDG_CACHE_HOME"] = str(tmp_path_factory.mktemp("xdg-cache"))


def _tree_bytes(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture(scope="session", autouse=True)
def _committed_configs_untouched():
    """fastgen's default --config-dir is `configs` in the working folder, which for a test is the repository: a run
    that forgets --config-dir would rewrite the committed configs (one did, and they were committed with a test's
    temporary paths in them). The suite fails if its runs changed them."""
    configs = ROOT / "configs"
    before = _tree_bytes(configs)
    yield
    changed = sorted(name for name, data in _tree_bytes(configs).items() if before.get(name) != data)
    assert changed == [], f"a test wrote into the repository's configs/ ({changed[:3]}): give it --config-dir"


@pytest.fixture(scope="session")
def builtin():
    return load_tokenizer("builtin")


@pytest.fixture(scope="session")
def small_dataset(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("small")
    result = run_fastgen(
        *SMALL, "--workers", "2", "--output-dir", str(root / "traces"), "--config-dir", str(root / "configs")
    )
    assert result.returncode == 0, result.stderr
    # --quiet means silent: nothing from the forked worker pools either (warnings, stray output).
    assert result.stderr == "", result.stderr
    return root


@pytest.fixture(scope="session")
def e2e_dataset(tmp_path_factory) -> Path:
    """The end-to-end suite's dataset (e2e.suites.run.Dataset: 4 scenario-1 sessions, 2 scenario-2 sets, 20 scenario-3
    sessions 0.5 s apart), generated once for the analysis tests that replay its configs."""
    from e2e.suites.run import Dataset, generate

    workdir = tmp_path_factory.mktemp("e2e-dataset")
    generate(workdir, "http://127.0.0.1:9", Dataset())
    return workdir


@pytest.fixture(scope="session")
def dataset(e2e_dataset) -> Path:
    """The same dataset under the name the bakeoff tests give it: fake engines answer from its traces, bakeoffs run
    its configs (tests/bakeoff/test_bakeoff_*.py, tests/e2e/test_e2e_fake_engine.py)."""
    return e2e_dataset


@pytest.fixture()
def two_sides(tmp_path):
    """Two sides' runs of one config (scenario1/c2): a vLLM that cached 900 of each later turn's 1000 prompt tokens,
    an SGLang that cached 300, with their KV usage samples (tests/results/test_results_*.py)."""
    from _support.results import scenario1_requests, write_folder

    write_folder(
        tmp_path / "a" / "scenario1" / "c2",
        scenario1_requests(900),
        samples=[{"vllm:kv_cache_usage_perc": 0.25}, {"vllm:kv_cache_usage_perc": 0.5}],
    )
    write_folder(
        tmp_path / "b" / "scenario1" / "c2",
        scenario1_requests(300),
        engine="sglang",
        samples=[{"sglang:token_usage": 0.9}],
    )
    return tmp_path / "a", tmp_path / "b"


def trace_files(traces: Path) -> list[Path]:
    return sorted(traces.glob("scenario*/session_*.json"))


def load_spans(path: Path) -> list[dict]:
    return json.loads(path.read_bytes())["spans"]


class RenderedPrompt:
    """The oracle for template counts: a span's prompt as a server renders it, by transformers' apply_chat_template
    (not fastgen's renderer), over the messages the span records, with the tools as inference-perf's request body
    carries them (its own cleaning) and the tool-call arguments as objects (vLLM's rewrite, the fake engine's copy
    of it), tokenized whole."""

    def __init__(self, folder: Path):
        os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
        from transformers import AutoTokenizer

        self.hf = AutoTokenizer.from_pretrained(str(folder), local_files_only=True)

    def tokens(self, attributes: dict) -> int:
        from e2e.engines.model import _arguments_as_objects
        from fastgen.traces.requests import wire_tools

        messages = json.loads(attributes["gen_ai.input.messages"])
        tools = wire_tools(json.loads(attributes["gen_ai.tool.definitions"]))
        text = self.hf.apply_chat_template(
            _arguments_as_objects(messages),
            tools=list(tools) if tools else None,
            add_generation_prompt=True,
            tokenize=False,
        )
        return len(self.hf(fixed_date(text), add_special_tokens=False)["input_ids"])


def fixed_date(text: str) -> str:
    """transformers renders strftime_now as today; fastgen as a fixed day (chat_template.FIXED_DATE), so that the
    same seed gives the same bytes every day: put that day in."""
    from datetime import datetime

    from fastgen.formats.chat_template import FIXED_DATE

    today, fixed = datetime.now(), datetime(*FIXED_DATE)
    for fmt in ("%d %b %Y", "%Y-%m-%d"):
        text = text.replace(today.strftime(fmt), fixed.strftime(fmt))
    return text


@pytest.fixture(scope="session")
def rendered_prompt():
    pytest.importorskip("transformers")
    pytest.importorskip("inference_perf")
    from fastgen.formats.tokenizer import BUILTIN_DIR

    return RenderedPrompt(BUILTIN_DIR)
