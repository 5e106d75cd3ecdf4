"""`fastgen analyze --definition aiperf` against AIPerf's own `aiperf analyze-trace` on fastgen's Mooncake export,
to 6 decimal places: a hand-made trace with known answers, and every config of a scaled-down default set.

Skipped unless FASTGEN_AIPERF_VENV names a venv where e2e.aiperf.install() finished (`make e2e-aiperf` installs
one into .e2e-aiperf/venv and runs this file).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from e2e.aiperf import INSTALL_MARKER, analyze_trace

VENV = os.environ.get("FASTGEN_AIPERF_VENV")
pytestmark = pytest.mark.skipif(
    not VENV or not (Path(VENV) / INSTALL_MARKER).exists(),
    reason="FASTGEN_AIPERF_VENV does not point at a venv installed by e2e.aiperf.install()",
)
ROOT = Path(__file__).resolve().parent.parent
KNOWN = [[0, 1, 2], [0, 1, 3], [4], [0, 1, 2, 5], [6, 0]]  # rates 0, 2/3, 0, 3/4, 0


def test_aiperf_and_fastgen_agree_on_a_hand_made_trace(tmp_path):
    from fastgen.analysis.aiperf import aiperf_cache_hit_rate

    trace = tmp_path / "known.jsonl"
    trace.write_text(
        "".join(
            json.dumps({"timestamp": i, "input_length": 512 * len(ids), "output_length": 1, "hash_ids": ids}) + "\n"
            for i, ids in enumerate(KNOWN)
        )
    )
    expected = (0 + 2 / 3 + 0 + 3 / 4 + 0) / 5
    assert aiperf_cache_hit_rate(KNOWN) == pytest.approx(expected, abs=1e-15)
    assert analyze_trace(Path(VENV), trace, tmp_path / "out.json")["cache_hit_rate"] == pytest.approx(
        expected, abs=1e-15
    )


@pytest.fixture(scope="module")
def small(tmp_path_factory) -> Path:
    from e2e.run import Dataset, generate

    workdir = tmp_path_factory.mktemp("aiperf")
    generate(workdir, "http://127.0.0.1:9", Dataset())
    return workdir


def test_aiperf_analyze_trace_on_the_export_equals_analyze_definition_aiperf(small, tmp_path):
    analysis = tmp_path / "analysis.json"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "fastgen",
            "analyze",
            str(small / "traces"),
            "--definition",
            "aiperf",
            "--json",
            str(analysis),
        ],
        check=True,
        cwd=ROOT,
        capture_output=True,
    )
    predicted = {c["config"]: c["aiperf_cache_hit_rate"] for c in json.loads(analysis.read_text())["configs"]}
    assert len(predicted) == 17
    for name, rate in predicted.items():
        trace = tmp_path / (name.replace("/", "_") + ".jsonl")
        subprocess.run(
            [
                sys.executable,
                "-m",
                "fastgen",
                "export",
                "mooncake",
                str(small / "traces"),
                "--config",
                name,
                "--out",
                str(trace),
                "--quiet",
            ],
            check=True,
            cwd=ROOT,
            capture_output=True,
        )
        measured = analyze_trace(Path(VENV), trace, tmp_path / f"{trace.stem}.out.json")["cache_hit_rate"]
        assert round(measured, 6) == round(rate, 6), name
        assert 0 < rate < 1
