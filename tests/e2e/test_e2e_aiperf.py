"""`fastgen analyze --definition aiperf` against AIPerf's own `aiperf analyze-trace` on fastgen's Mooncake export,
to 6 decimal places: a hand-made trace with known answers, and every config of a scaled-down default set. And
`fastgen export dag_jsonl` read by AIPerf's own dag_jsonl loader: what it builds is what fastgen wrote. And
`fastgen export mooncake_sessions` replayed by `aiperf profile --fixed-schedule` against a local server: sessions
start as a Poisson process at the rate.

Skipped unless FASTGEN_AIPERF_VENV names a venv where e2e.real.aiperf.install() finished (`make e2e-aiperf` installs
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

from _support import ROOT
from e2e.real.aiperf import INSTALL_MARKER, analyze_trace, load_dag

VENV = os.environ.get("FASTGEN_AIPERF_VENV")
pytestmark = pytest.mark.skipif(
    not VENV or not (Path(VENV) / INSTALL_MARKER).exists(),
    reason="FASTGEN_AIPERF_VENV does not point at a venv installed by e2e.real.aiperf.install()",
)
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
    from e2e.suites.run import Dataset, generate

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


# fastgen export dag_jsonl, read by AIPerf's own dag_jsonl loader (e2e.real.aiperf.load_dag): one config of each trace
# directory, and the hand-made graphs of tests/export/test_export_dag.py (a new prompt, a join, a second root).
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
    from _support.dag import hand_made_sessions

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


# Sessions that arrive as a Poisson process: `fastgen export mooncake_sessions` draws each session's start at the
# config's rate (here --session-rate) into the lines' `timestamp`, and AIPerf's fixed schedule sends each first
# request then and each later one its `delay` after the answer before it. 400 scenario-3 sessions (c500_stable of the
# smoke workload at --scale 20) at 10 a second, against the e2e's local server, which records when each request
# arrived and when its answer was out. 400: the gaps' coefficient of variation has a sampling spread of about 0.05
# there, so 0.8-1.2 holds four of them (a seed whose draw falls outside it: about 1 in 30,000); the mean gap, given the count over the
# window, is within 1/(count+1) of 1/rate.
POISSON_SESSIONS = 400
POISSON_RATE = 10.0


def aiperf_profile_command(venv: Path, dataset: Path, *, url: str, model: str, tokenizer: Path, out: Path) -> list:
    """The command the docs give (docs/analyze.md), with this run's paths."""
    return [
        str(Path(venv).resolve() / "bin" / "aiperf"), "profile",
        "--model", model, "--url", url, "--endpoint-type", "chat", "--streaming",
        "--input-file", str(dataset), "--custom-dataset-type", "mooncake_trace", "--fixed-schedule",
        "--tokenizer", str(tokenizer), "--artifact-dir", str(out), "--ui-type", "none",
    ]  # fmt: skip


def session_start_gaps(records: list[dict], lines: list[dict]) -> tuple[list[float], dict]:
    """(the gaps between session starts as the server saw them, each session's requests as (position, arrived,
    answered)); a request is known by its messages, which AIPerf sends as the line wrote them."""
    where = {json.dumps(line["messages"]): (line["session_id"], i) for i, line in enumerate(lines)}
    first = {}
    for i, line in enumerate(lines):
        first.setdefault(line["session_id"], i)
    by_session = defaultdict(list)
    for record in records:
        session, index = where[json.dumps(record["body"]["messages"])]
        by_session[session].append((index - first[session], record["t"], record["t_done"]))
    starts = sorted(min(t for _, t, _ in requests) for requests in by_session.values())
    return [b - a for a, b in zip(starts, starts[1:])], by_session


def gap_mean_and_cv(gaps: list[float]) -> tuple[float, float]:
    mean = sum(gaps) / len(gaps)
    return mean, (sum((g - mean) ** 2 for g in gaps) / len(gaps)) ** 0.5 / mean


def spread_from(real: list[float], planned: list[float]) -> float:
    """The interquartile range of how far each real time lies from its planned one."""
    off = sorted(r - p for r, p in zip(real, planned))
    return off[3 * len(off) // 4] - off[len(off) // 4]


def test_aiperf_fixed_schedule_replays_sessions_started_as_a_poisson_process_at_the_rate(tmp_path):
    from e2e.engines.server import ServerThread

    traces, configs = tmp_path / "traces", tmp_path / "configs"
    made = subprocess.run(
        [sys.executable, "-m", "fastgen", "--workload", "smoke", "--scale", "20", "--tokenizer", "builtin", "--quiet",
         "--output-dir", str(traces), "--config-dir", str(configs), "--max-wait-ms", "500"],
        cwd=ROOT, capture_output=True, text=True,
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    dataset = tmp_path / "sessions.jsonl"
    exported = subprocess.run(
        [sys.executable, "-m", "fastgen", "export", "mooncake_sessions", str(traces), "--configs", str(configs),
         "--config", "scenario3/c500_stable", "--out", str(dataset), "--session-rate", str(POISSON_RATE)],
        cwd=ROOT, capture_output=True, text=True,
    )  # fmt: skip
    assert exported.returncode == 0, exported.stderr
    lines = [json.loads(line) for line in dataset.read_text().splitlines()]
    assert len({line["session_id"] for line in lines}) == POISSON_SESSIONS
    with ServerThread(traces / "tokenizer", model_name="meta-llama/Llama-3.3-70B-Instruct") as server:
        run = subprocess.run(
            aiperf_profile_command(
                Path(VENV), dataset, url=server.base_url, model=server.model_name, tokenizer=traces / "tokenizer",
                out=tmp_path / "aiperf",
            ),
            capture_output=True, text=True, timeout=600, cwd=tmp_path,
        )  # fmt: skip
        records = list(server.records)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    assert len(records) == len(lines)  # every request once, as written
    gaps, by_session = session_start_gaps(records, lines)
    assert len(by_session) == POISSON_SESSIONS
    # The Poisson process is the schedule written (seeded, so this can be asserted exactly); the replay's part is to
    # keep it. The real gaps ride on this machine's clock, so they are printed, not bounded.
    scheduled = sorted(line["timestamp"] / 1000 for line in lines if "timestamp" in line)
    assert len(scheduled) == POISSON_SESSIONS
    planned = [b - a for a, b in zip(scheduled, scheduled[1:])]
    mean, cv = gap_mean_and_cv(planned)
    print(f"schedule: {POISSON_SESSIONS} sessions, mean gap {mean:.4f} s (1/rate {1 / POISSON_RATE}), CV {cv:.3f}")
    assert 0.8 <= cv <= 1.2, cv
    assert abs(mean - 1 / POISSON_RATE) <= 0.1 / POISSON_RATE, mean
    real_mean, real_cv = gap_mean_and_cv(gaps)
    starts = sorted(min(t for _, t, _ in requests) for requests in by_session.values())
    paced = [scheduled[0] + i * mean for i in range(len(scheduled))]  # the same rate at a fixed pace
    off_schedule, off_pace = spread_from(starts, scheduled), spread_from(starts, paced)
    print(
        f"replayed: mean gap {real_mean:.4f} s, CV {real_cv:.3f}; starts off the schedule by {off_schedule:.3f} s "
        f"(interquartile range), off a fixed pace by {off_pace:.3f} s"
    )
    # Kept, the starts sit on the schedule up to the replay's jitter; sent at a fixed pace (or at once) they would
    # drift from it as a Poisson process drifts from its mean rate, about a second over 40 s. A relative test: a
    # busy machine's lag moves both spreads alike.
    assert off_schedule < off_pace / 4, (off_schedule, off_pace)
    # each later request waits its recorded delay after the answer before it (10 ms of clock slack)
    delays = defaultdict(list)
    for line in lines:
        delays[line["session_id"]].append(line.get("delay", 0))
    for session, requests in by_session.items():
        turns = sorted(requests)
        assert [position for position, _, _ in turns] == list(range(len(delays[session])))
        for (_, _, done), (_, sent, _), delay in zip(turns, turns[1:], delays[session][1:]):
            assert sent - done >= delay / 1000 - 0.01, (session, sent - done, delay)
