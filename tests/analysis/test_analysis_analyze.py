"""analysis/analyze.py: the targets, the streamed and the held reading, the service model's effect; and the prediction
against what a fake server measured under the real inference-perf (slow)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fastgen.analysis.schedule import ServiceModel
from fastgen.formats.rows import trace_dir_of


@pytest.fixture(scope="module")
def small(e2e_dataset) -> Path:
    """The e2e suite's dataset (conftest.py), generated once a session."""
    return e2e_dataset


def test_streamed_directories_give_the_figures_of_held_ones(small):
    """The default path reads each directory into a spill and forgets each session's own blocks once every replay
    has ended it; --sweep holds the sessions and forgets nothing: every figure but the sweep must agree."""
    import dataclasses

    from fastgen.analysis import AnalysisOptions, analyze, config_targets

    targets = config_targets(small / "configs", small / "traces")
    for definition, capacity in (("vllm", 4096), ("aiperf", None)):
        options = AnalysisOptions(capacity_tokens=capacity, definition=definition)
        _, streamed = analyze(targets, small / "traces" / "tokenizer", options, workers=1)
        _, held = analyze(targets, small / "traces" / "tokenizer", dataclasses.replace(options, sweep=True), workers=1)
        for a, b in zip(streamed, held):
            assert dataclasses.replace(a, sweep=[]) == dataclasses.replace(b, sweep=[]), a.name


def test_kv_bytes_per_token_of_llama_70b_is_320_kib(tmp_path):
    from fastgen.analysis import kv_bytes_per_token

    config = tmp_path / "config.json"
    config.write_text(
        json.dumps(
            {
                "num_hidden_layers": 80,
                "num_attention_heads": 64,
                "num_key_value_heads": 8,
                "hidden_size": 8192,
                "torch_dtype": "bfloat16",
            }
        )
    )
    assert kv_bytes_per_token(config) == 320 * 1024


# --- prediction against measurement: the fake server answers the recorded outputs, so the replay sends the recorded
# prompts byte for byte, and counts cached tokens with the same cache code over the real chat-template rendering


@pytest.fixture(scope="module")
def replayed(tmp_path_factory):
    """(workdir, {(config, capacity): server records}) for a few configs, unbounded and at a 4096-token capacity."""
    from e2e.engines.fake_engine import EngineProfile
    from e2e.suites.replay import run_inference_perf
    from e2e.suites.run import Dataset, free_port, generate
    from e2e.engines.server import ServerThread

    workdir = tmp_path_factory.mktemp("predicted")
    port = free_port()
    generate(workdir, f"http://127.0.0.1:{port}", Dataset())
    runs = {}
    for capacity, configs in ((None, MEASURED), (CAPACITY, MEASURED_AT_CAPACITY)):
        with ServerThread(
            workdir / "traces" / "tokenizer",
            port=port,
            answers_from=workdir / "traces",
            profile=EngineProfile(kv_capacity_tokens=capacity),
        ) as server:
            for name in configs:
                server.reset()
                code = run_inference_perf(
                    workdir / "configs" / f"{name}.yml", log=workdir / "logs" / f"{name}.log", timeout_s=300
                )
                assert code == 0, (workdir / "logs" / f"{name}.log").read_text()[-2000:]
                runs[(name, capacity)] = [r for r in server.records if r["status"] == 200]
    return workdir, runs


MEASURED = ("scenario1/c1", "scenario1/c10", "scenario2/c10_sync", "scenario3/c100_noisy")


MEASURED_AT_CAPACITY = ("scenario1/c10", "scenario3/c100_noisy")


CAPACITY = 4096


# the fake server's speed for the prediction: it spends nothing on a prompt (prefill_s_per_token 0), renders it in a
# few milliseconds and streams the recorded answer without waits, so a request ends milliseconds after it arrives
# and each session's next turn follows its recorded wait at once. Its cache is the model's own (vLLM's rules, no
# step budget: it admits every request as it arrives).
FAKE_SERVER_SPEED = ServiceModel(prefill_tokens_per_s=1e6, decode_tokens_per_s=1e4, ingest_tokens_per_s=1e9)


# The cause of the spread at capacity, measured: the sessions of scenario1/c10 release their next turns together
# (the same capped wait after answers that end milliseconds apart), and inference-perf's worker processes race to
# send them; at 4,096 tokens (256 blocks for 272-328 blocks of prompts from the fourth turn on) LRU keeps whichever
# sessions came last, so the order decides the hits: 80.1-85.8 % in 19 runs of 2026-12-03 and 80.2, 80.2, 81.4,
# 83.6 % in four of 2026-12-04, against 80.4 % replayed in the order the model breaks ties in. The band replays the
# race (seeded arrival jitter of up to 10 ms, half of it a session's own, half each request's: 80.0-83.2 % over
# BAND_SEEDS seeds); the measured hit ratio lies within CAPACITY_TOLERANCE_POINTS of that band (the rare 85.8 %
# 2.6 points above it). scenario3/c100_noisy: sessions 0.5 s apart, nothing to race: band 28.7-29.3 %.
CAPACITY_TOLERANCE_POINTS = 3.0


BAND_SEEDS = 16


def _measured_and_predicted(workdir: Path, runs: dict, name: str, capacity, jitter=None):
    from e2e.checks.traces import index_spans, load_session, request_key
    from fastgen.analysis.analyze import Corpus, config_targets, predict
    from fastgen.analysis.cache import BlockCache
    from fastgen.traces.blocks import load_reading

    (target,) = [t for t in config_targets(workdir / "configs", workdir / "traces") if t.name == name]
    corpus = Corpus(target.trace_dir, load_reading(workdir / "traces" / "tokenizer"), 16)
    predicted = {
        (str(corpus.files[o.file_index]), int(o.event_id.split("_")[1])): (o.prompt_tokens, o.cached_tokens)
        for o in predict(target, corpus, BlockCache(16, capacity), FAKE_SERVER_SPEED, jitter=jitter)
    }
    spans = index_spans({str(f): load_session(f) for f in corpus.files})
    measured = {}
    for record in runs[(name, capacity)]:
        span = spans[request_key(record["body"])]
        usage = record["response"]["usage"]
        measured[(span.file, span.index)] = (usage["prompt_tokens"], usage["prompt_tokens_details"]["cached_tokens"])
    return measured, predicted


@pytest.mark.slow  # the `replayed` fixture: inference-perf
@pytest.mark.parametrize("name", MEASURED)
def test_analyze_predicts_the_fake_servers_prompt_tokens_and_pooled_hits_exactly(replayed, name):
    measured, predicted = _measured_and_predicted(*replayed, name, None)
    assert measured.keys() == predicted.keys()
    # the same prompts, token for token: the requests inference-perf sent are the ones analyze rebuilt
    assert {k: v[0] for k, v in measured.items()} == {k: v[0] for k, v in predicted.items()}
    # with an unbounded cache every block is missed once, by whichever request asks first: the total is exact
    assert sum(v[1] for v in measured.values()) == sum(v[1] for v in predicted.values())
    if name == "scenario1/c1":  # one request at a time: the same order, so request for request
        assert measured == predicted


@pytest.mark.slow
@pytest.mark.parametrize("name", MEASURED)
def test_the_server_counts_every_recorded_prompt_as_the_span_records_it(replayed, name):
    # recorded answers: every request inference-perf sends is the recorded prompt, and the fake server tokenizes it
    # as vLLM does (transformers over the chat template): its prompt_tokens are the recorded input_tokens, each one
    import yaml

    from e2e.checks.traces import index_spans, load_session, request_key

    workdir, runs = replayed
    config = yaml.safe_load((workdir / "configs" / f"{name}.yml").read_text())
    trace_dir = Path(trace_dir_of(config["data"]["otel_trace_replay"])).name  # layouts share content
    spans = index_spans({str(f): load_session(f) for f in sorted((workdir / "traces" / trace_dir).glob("*.json"))})
    pairs = [
        (record["response"]["usage"]["prompt_tokens"], spans[request_key(record["body"])].input_tokens)
        for record in runs[(name, None)]
    ]
    assert pairs and all(server == recorded for server, recorded in pairs), [p for p in pairs if p[0] != p[1]][:5]


@pytest.mark.slow
@pytest.mark.parametrize("name", MEASURED_AT_CAPACITY)
def test_analyze_at_capacity_agrees_with_the_fake_server_within_the_measured_tolerance(replayed, name):
    from fastgen.analysis.schedule import Jitter

    def percent(pairs: dict) -> float:
        return 100 * sum(v[1] for v in pairs.values()) / sum(v[0] for v in pairs.values())

    measured, predicted = _measured_and_predicted(*replayed, name, CAPACITY)
    band = [
        percent(_measured_and_predicted(*replayed, name, CAPACITY, Jitter(seed=k, wake_s=0.0))[1])
        for k in range(1, BAND_SEEDS + 1)
    ]
    low, high = min(band + [percent(predicted)]), max(band + [percent(predicted)])
    unbounded = _measured_and_predicted(*replayed, name, None)[1]
    assert high < percent(unbounded)
    hit = percent(measured)
    assert low - CAPACITY_TOLERANCE_POINTS <= hit <= high + CAPACITY_TOLERANCE_POINTS, (hit, low, high)


def test_without_configs_a_dataset_folder_is_its_trace_directories_not_its_manifest_or_tokenizer(tmp_path):
    from fastgen.analysis.analyze import directory_targets

    (tmp_path / "manifest.json").write_text("{}")
    for folder, names in {
        "tokenizer": ["tokenizer.json", "tokenizer_config.json"],
        "scenario_a": ["session_0000.json", "session_0001.json.zst"],
        "scenario_b": ["session_0000.json"],
        "empty": [],
    }.items():
        (tmp_path / folder).mkdir()
        for name in names:
            (tmp_path / folder / name).write_text("{}")
    targets = directory_targets(tmp_path)
    assert [(t.name, t.load.num_sessions) for t in targets] == [("scenario_a", 2), ("scenario_b", 1)]
    assert [t.name for t in directory_targets(tmp_path / "scenario_b")] == ["scenario_b"]


def test_analyze_speeds_change_the_at_capacity_prediction_and_not_the_unbounded_one(small):
    import dataclasses

    from fastgen.analysis import AnalysisOptions, analyze, config_targets
    from fastgen.analysis.schedule import ServiceModel

    targets = [t for t in config_targets(small / "configs", small / "traces") if t.name == "scenario3/c100_noisy"]
    options = AnalysisOptions(capacity_tokens=4096)
    (fast,) = analyze(targets, small / "traces" / "tokenizer", options, workers=1)[1]
    (slow,) = analyze(
        targets,
        small / "traces" / "tokenizer",
        dataclasses.replace(options, service=ServiceModel(300.0, 5.0)),
        workers=1,
    )[1]
    assert slow.cached_infinite == fast.cached_infinite  # unbounded: every block is missed once, in any order
    assert slow.cached_capacity != fast.cached_capacity


def test_with_a_band_the_point_is_the_median_replay_and_the_band_holds_the_unjittered_one(small):
    """scenario3/c100_noisy at 16,448 tokens is a knee: the jittered replays differ. The point is their median (with
    the unjittered replay), its per-turn figures that replay's, and the band spans every replay."""
    import dataclasses
    import statistics

    from fastgen.analysis import AnalysisOptions, analyze, config_targets

    targets = [t for t in config_targets(small / "configs", small / "traces") if t.name == "scenario3/c100_noisy"]
    options = AnalysisOptions(capacity_tokens=16448, band=6)
    (banded,) = analyze(targets, small / "traces" / "tokenizer", options, workers=1)[1]
    (alone,) = analyze(targets, small / "traces" / "tokenizer", dataclasses.replace(options, band=0), workers=1)[1]
    replays = banded.band_capacity
    assert len(replays) == 7 and replays[0] == alone.cached_capacity  # the unjittered replay first
    assert len(set(replays)) > 1, replays  # a knee: the interleaving decides
    assert banded.cached_capacity == statistics.median_low(replays)
    assert banded.band("capacity") == (banded.percent(min(replays)), banded.percent(max(replays)))
    assert sum(v[2] for v in banded.by_label.values()) == banded.cached_capacity  # the median replay's turns
    assert alone.band("capacity") is None and not alone.band_capacity
    assert banded.cached_infinite == alone.cached_infinite  # unbounded: every order misses each block once
