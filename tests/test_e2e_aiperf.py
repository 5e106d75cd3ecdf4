"""`fastgen analyze --definition aiperf` against AIPerf's own `aiperf analyze-trace` on fastgen's Mooncake export,
to 6 decimal places: a hand-made trace with known answers, and every config of a scaled-down default set. And
`fastgen export dag_jsonl` read by AIPerf's own dag_jsonl loader: what it builds is what fastgen wrote.

Skipped unless FASTGEN_AIPERF_VENV names a venv where e2e.aiperf.install() finished (`make e2e-aiperf` installs
one into .e2e-aiperf/venv and runs this file).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

from e2e.aiperf import INSTALL_MARKER, analyze_trace, load_dag

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


# fastgen export dag_jsonl, read by AIPerf's own dag_jsonl loader (e2e.aiperf.load_dag): one config of each trace
# directory, and the hand-made graphs of tests/test_export_dag.py (a new prompt, a join, a second root).
DAG_CONFIGS = [
    "scenario1/c10",
    "scenario2/c10_sync",
    "scenario2/c10_stagger",
    "scenario3/c100_stable",
    "scenario3/c100_noisy",
]


def _spawned(turn: dict) -> list[str]:
    return [c for entry in turn.get("spawns", ()) for c in ([entry] if isinstance(entry, str) else entry["children"])]


def _as_written(lines: list[dict]) -> dict:
    """What AIPerf's loader should build from fastgen's lines, in load_dag's shape."""
    named = {c for line in lines for c in line.get("pre_session_spawns", ())}
    named |= {c for line in lines for turn in line["turns"] for c in [*turn.get("forks", ()), *_spawned(turn)]}
    out = {}
    for line in lines:
        turns, joins = line["turns"], defaultdict(list)
        for i, turn in enumerate(turns):
            for entry in turn.get("spawns", ()):
                if isinstance(entry, dict):
                    joins[entry["join_at"]] += entry["children"]
                elif i + 1 < len(turns):  # a bare spawn before the last turn joins the next one
                    joins[i + 1].append(entry)
        out[line["session_id"]] = {
            "root": line["session_id"] not in named,
            "pre": line.get("pre_session_spawns", []),
            "turns": [
                {
                    "messages": len(turn["messages"]),
                    "max_tokens": turn["max_tokens"],
                    "delay": float(turn["delay"]),
                    "tools": "tools" in turn,
                    "extra": turn.get("extra"),
                    "forks": turn.get("forks", []),
                    "spawns": _spawned(turn),
                    "joins": joins[i],
                }
                for i, turn in enumerate(turns)
            ],
        }
    return out


@pytest.mark.parametrize("name", DAG_CONFIGS)
def test_aiperf_loads_the_dag_export_as_fastgen_wrote_it(small, tmp_path, name):
    out = tmp_path / "dag.jsonl"
    result = subprocess.run(
        [sys.executable, "-m", "fastgen", "export", "dag_jsonl", str(small / "traces"), "--config", name]
        + ["--out", str(out)],
        check=True,
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    said = re.match(
        r"wrote (\d+) sessions of \S+ \((\d+) requests in (\d+) conversations, (\d+) forked, (\d+) spawned\)",
        result.stdout,
    )
    assert said, result.stdout
    sessions, requests, conversations, forks, spawns = map(int, said.groups())
    loaded = load_dag(Path(VENV), out)
    assert loaded == _as_written([json.loads(line) for line in out.read_text().splitlines()])
    assert sum(c["root"] for c in loaded.values()) == sessions
    assert (sum(len(c["turns"]) for c in loaded.values()), len(loaded)) == (requests, conversations)
    assert sum(len(t["forks"]) for c in loaded.values() for t in c["turns"]) == forks
    assert sum(len(t["spawns"]) for c in loaded.values() for t in c["turns"]) == spawns == 0
    assert forks == (sum(len(c["turns"]) for c in loaded.values()) - sessions if name.startswith("scenario2") else 0)


def _export(traces: Path, name: str, out: Path) -> tuple[int, ...]:
    result = subprocess.run(
        [sys.executable, "-m", "fastgen", "export", "dag_jsonl", str(traces), "--config", name, "--out", str(out)],
        check=True,
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    said = re.match(
        r"wrote (\d+) sessions of \S+ \((\d+) requests in (\d+) conversations, (\d+) forked, (\d+) spawned\)",
        result.stdout,
    )
    assert said, result.stdout
    return tuple(map(int, said.groups()))


@pytest.mark.parametrize(
    "workload, name", [("agent", "agent_loop/c5"), ("declared", "chain/c5"), ("declared", "fan/c10")]
)
def test_aiperf_loads_the_dag_export_of_the_agent_shapes(tmp_path, workload, name):
    """Sub-agents as spawned conversations joined back, declared chains as turns, declared fans as forks."""
    subprocess.run(
        [sys.executable, "-m", "fastgen", "--workload", workload, "--tokenizer", "builtin", "--scale", "0.1"]
        + [
            "--budget-scale",
            "0.1",
            "--output-dir",
            str(tmp_path / "traces"),
            "--config-dir",
            str(tmp_path / "configs"),
        ],
        check=True,
        cwd=ROOT,
        capture_output=True,
    )
    out = tmp_path / "dag.jsonl"
    sessions, requests, conversations, forks, spawns = _export(tmp_path / "traces", name, out)
    loaded = load_dag(Path(VENV), out)
    assert loaded == _as_written([json.loads(line) for line in out.read_text().splitlines()])
    assert (sum(len(c["turns"]) for c in loaded.values()), len(loaded)) == (requests, conversations)
    joined = [t["joins"] for c in loaded.values() for t in c["turns"] if len(t["joins"]) >= 2]
    if workload == "agent":  # each session's join waits for its two or three sub-agents
        assert spawns >= 2 * sessions and len(joined) == sessions
    else:
        assert spawns == 0 and not joined and (forks > 0) == (name == "fan/c10")


def test_aiperf_loads_the_hand_made_graphs(tmp_path):
    from fastgen.export import session_conversations, write_dag
    from test_export_dag import hand_made_sessions

    lines = []
    for name, session in hand_made_sessions().items():
        lines += session_conversations(session, 15000, name.replace(" ", "-"))[0]
    out = tmp_path / "hand.jsonl"
    write_dag(lines, out)
    loaded = load_dag(Path(VENV), out)
    assert loaded == _as_written(lines)
    assert loaded["join"]["turns"][1]["joins"] == ["join/1"] and loaded["roots"]["pre"] == ["roots/1"]
    assert loaded["compaction"]["turns"][1]["spawns"] == ["compaction/1"]
    assert sorted(c for c, v in loaded.items() if v["root"]) == sorted(
        n.replace(" ", "-") for n in hand_made_sessions()
    )
