"""`fastgen export mooncake_sessions`: a config's sessions as AIPerf mooncake_trace lines with whole prompts, each
session's first request at a seeded Poisson start at the config's rate, the rest after their recorded waits, checked
against inference-perf's own reading of the files (tests/e2e/test_e2e_aiperf.py replays one with the real AIPerf)."""

from __future__ import annotations

import json
from collections import defaultdict

from conftest import run_fastgen
from fastgen.export import arrivals_seed, poisson_starts_ms, session_conversations
from fastgen.traces.requests import read_session


def _config(small_dataset, name: str) -> str:
    return (small_dataset / "configs" / f"{name}.yml").read_text()


def _rate(small_dataset, name: str) -> float:
    return float(next(ln.split(":")[1] for ln in _config(small_dataset, name).splitlines() if "session_rate:" in ln))


def test_each_session_starts_at_a_poisson_start_and_carries_inference_perfs_requests(small_dataset, tmp_path):
    from fastgen.analysis import config_targets
    from fastgen.analysis.analyze import Corpus, target_slots
    from fastgen.traces.blocks import load_reading

    name = "scenario3/c100_stable"
    out = tmp_path / "sessions.jsonl"
    result = run_fastgen(
        "export", "mooncake_sessions", str(small_dataset / "traces"), "--config", name, "--out", str(out)
    )
    assert result.returncode == 0, result.stderr
    rate = _rate(small_dataset, name)
    assert f"starting as a Poisson process of {rate:.6g} sessions a second" in result.stdout
    assert "--custom-dataset-type mooncake_trace --fixed-schedule" in result.stdout
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    target = next(t for t in config_targets(small_dataset / "configs", small_dataset / "traces") if t.name == name)
    corpus = Corpus(target.trace_dir, load_reading(small_dataset / "traces" / "tokenizer"), 16)
    slots = target_slots(target, corpus)
    by_session = defaultdict(list)
    for line in lines:
        by_session[line["session_id"]].append(line)
    assert len(by_session) == len(slots) == target.load.num_sessions
    starts = poisson_starts_ms(len(slots), rate, arrivals_seed(target.load.base_seed))
    assert [s[0]["timestamp"] for s in by_session.values()] == starts
    for index, (session_id, written) in zip(slots, by_session.items()):
        session = read_session(corpus.files[index])
        assert session_id == session.session_id
        (conversation,), _ = session_conversations(session, target.load.max_wait_ms)
        assert len(written) == len(session.requests) == len(conversation["turns"])
        for position, (line, request, turn) in enumerate(zip(written, session.requests, conversation["turns"])):
            assert ("timestamp" in line, "delay" in line) == (position == 0, position > 0)
            assert (
                line.get("delay", 0)
                == turn["delay"]
                == (min(request.wait_ms, target.load.max_wait_ms) if position else 0)
            )
            assert line["messages"] == list(request.messages)  # the whole prompt inference-perf sends
            assert line.get("tools") == (list(request.tools) if request.tools else None)
            assert line["output_length"] == request.max_tokens
            assert line.get("extra") == turn.get("extra")


def test_the_same_dataset_gives_the_same_bytes_and_the_rate_sets_the_window(small_dataset, tmp_path):
    base = ["export", "mooncake_sessions", str(small_dataset / "traces"), "--config", "scenario3/c100_stable"]
    a, b, fast = tmp_path / "a.jsonl", tmp_path / "b.jsonl", tmp_path / "fast.jsonl"
    assert run_fastgen(*base, "--out", str(a), "--quiet").returncode == 0
    assert run_fastgen(*base, "--out", str(b), "--quiet").returncode == 0
    assert a.read_bytes() == b.read_bytes()
    result = run_fastgen(*base, "--out", str(fast), "--session-rate", "50")
    assert result.returncode == 0, result.stderr
    starts = [json.loads(line)["timestamp"] for line in fast.read_text().splitlines() if '"timestamp"' in line]
    assert starts == poisson_starts_ms(len(starts), 50.0, arrivals_seed(42)) and starts[-1] <= len(starts) / 50 * 1000
    assert f"over {len(starts) / 50:.6g} s" in result.stdout


def test_configs_without_a_rate_or_with_forks_are_refused(small_dataset, tmp_path):
    traces = str(small_dataset / "traces")
    out = tmp_path / "x.jsonl"
    base = ["export", "mooncake_sessions", traces, "--config"]
    no_rate = run_fastgen(*base, "scenario1/c10", "--out", str(out))
    assert no_rate.returncode == 2 and "has no session_rate" in no_rate.stderr and not out.exists()
    given = run_fastgen(*base, "scenario1/c10", "--out", str(out), "--session-rate", "2")
    assert given.returncode == 0, given.stderr
    out.unlink()
    fans = run_fastgen(*base, "scenario2/c10_sync", "--out", str(out), "--session-rate", "2")
    assert fans.returncode != 0 and "export this config as dag_jsonl" in fans.stderr and not out.exists()
    other = run_fastgen("export", "dag_jsonl", traces, "--config", "scenario3/c100_stable", "--out", str(out))
    assert other.returncode == 0
    alone = run_fastgen(
        "export", "dag_jsonl", traces, "--config", "scenario3/c100_stable", "--out", str(out), "--session-rate", "2"
    )
    assert alone.returncode == 2 and "--session-rate" in alone.stderr
