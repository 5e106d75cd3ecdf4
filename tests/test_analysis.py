"""fastgen.analysis: the cache and the schedule on hand-made requests with hand-computed answers, then `fastgen
analyze` on a real generated dataset and on bad input."""

from __future__ import annotations

import dataclasses
import json
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from fastgen.analysis.aiperf import aiperf_cache_hit_rate
from fastgen.formats.rows import trace_dir_of
from fastgen.analysis.cache import BlockCache, BlockIds
from fastgen.analysis.schedule import Load, PlannedRequest, ServiceModel, replay_slots, simulate, single_engine
from fastgen.analysis.sharing import SharedBlocks
from fastgen.analysis.side_by_side import Replay, read_order, run_side_by_side
from fastgen.errors import SpecError
from fastgen.traces.blocks import block_hashes

ROOT = Path(__file__).resolve().parent.parent
BS = 16


def hashes(*keys: int) -> np.ndarray:
    return np.asarray(keys, dtype=np.uint64)


def request(event, blocks, *, preds=(), wait_ms=0, extra=5, output=10, label="1") -> PlannedRequest:
    return PlannedRequest(event, tuple(preds), wait_ms, hashes(*blocks), len(blocks) * BS + extra, output, label)


def test_two_sessions_sharing_exactly_k_blocks_hit_k_blocks():
    cache = BlockCache(BS)
    first, held = cache.admit(hashes(*range(1, 11)), 10 * BS + 5)
    cache.publish(held)
    second, _ = cache.admit(hashes(1, 2, 3, 4, 101, 102), 6 * BS + 5)
    assert (first, second) == (0, 4 * BS)


def test_the_last_prompt_token_is_always_computed():
    cache = BlockCache(BS)
    _, held = cache.admit(hashes(1, 2, 3, 4), 4 * BS)
    cache.publish(held)
    again, _ = cache.admit(hashes(1, 2, 3, 4), 4 * BS)  # exactly 4 full blocks: the 4th holds the last token
    assert again == 3 * BS


def test_block_hashes_chain_over_the_whole_prefix():
    a = block_hashes(np.arange(40, dtype=np.uint32), BS)
    b = block_hashes(np.concatenate([np.arange(16), np.arange(100, 124)]).astype(np.uint32), BS)
    c = block_hashes(np.concatenate([np.arange(100, 116), np.arange(16, 32)]).astype(np.uint32), BS)
    assert len(a) == 2 and a[0] == b[0] and a[1] != b[1]
    assert c[1] != a[1]  # the same tokens after a different prefix are a different block


def test_replay_slots_are_inference_perfs_shuffle():
    order = list(range(50))
    random.seed(42)
    random.shuffle(order)
    assert replay_slots(50, 42, 10) == order[:10]
    assert replay_slots(3, 7, 10) == replay_slots(3, 7, 3)  # never more slots than files


def test_fan_out_branches_run_together_and_share_the_root():
    root = request("root", [1, 2, 3, 4], label="0")
    branches = [
        request(f"b{k}", [1, 2, 3, 4, 5, 10 + k], preds=("root",), wait_ms=100, label=str(k)) for k in range(1, 4)
    ]
    cache = BlockCache(BS)
    outcomes = simulate(lambda i: [root, *branches], [0], Load(1, 1), cache)
    cached = {o.event_id: o.cached_tokens for o in outcomes}
    # the root's 4 blocks for every branch; block 5 is new to the first branch to start, then the siblings hit it
    assert cached == {"root": 0, "b1": 4 * BS, "b2": 5 * BS, "b3": 5 * BS}
    starts = {o.event_id: o.start_s for o in outcomes}
    assert starts["b1"] == starts["b2"] == starts["b3"] > starts["root"]


def test_a_capacity_of_one_request_evicts_the_other_sessions_prefix_tail_first():
    # no output but the one token each request gives: the capacities below are counted in prompt blocks (generated
    # blocks take room too, tested below)
    a1 = request("a1", [1, 2, 3], output=0, extra=0)
    a2 = request("a2", [1, 2, 3, 4], preds=("a1",), wait_ms=60_000, label="2", output=0, extra=0)
    b1 = request("b1", [7, 8, 9], output=0, extra=0)
    sessions = {0: [a1, a2], 1: [b1]}
    load = Load(2, 2, session_rate=0.5)  # b's session starts at 2 s, after a1 ended and before a2 (15 s later)
    unbounded = simulate(sessions.__getitem__, [0, 1], load, BlockCache(BS))
    assert {o.event_id: o.cached_tokens for o in unbounded}["a2"] == 3 * BS
    # room for a2's four blocks: b1 evicted two of a1's free blocks, tail first, so a2 still finds a1's first one
    four = simulate(sessions.__getitem__, [0, 1], load, BlockCache(BS, capacity_tokens=4 * BS))
    assert {o.event_id: o.cached_tokens for o in four}["a2"] == 1 * BS
    # room for both sessions' blocks: nothing evicted
    six = simulate(sessions.__getitem__, [0, 1], load, BlockCache(BS, capacity_tokens=6 * BS))
    assert {o.event_id: o.cached_tokens for o in six}["a2"] == 3 * BS


def test_blocks_a_running_request_holds_are_not_evicted():
    cache = BlockCache(BS, capacity_tokens=4 * BS)
    _, running = cache.admit(hashes(1, 2, 3), 3 * BS + 1)
    cache.publish(running)
    _, other = cache.admit(hashes(7, 8, 9), 3 * BS + 1)  # needs 3 blocks, 1 free: the running request's stay
    cache.publish(other)
    assert cache.overflowed == 2 and cache.evicted == 0
    again, _ = cache.admit(hashes(1, 2, 3, 4), 4 * BS + 1)
    assert again == 3 * BS


def test_a_hold_from_before_a_clear_is_released_as_nothing():
    cache = BlockCache(BS, capacity_tokens=8 * BS)
    _, old = cache.admit(hashes(1, 2, 3), 3 * BS + 1)
    cache.publish(old)
    cache.clear()
    got, new = cache.admit(hashes(1, 2, 3), 3 * BS + 1)
    cache.publish(new)
    assert got == 0
    cache.release(old)  # must not free the blocks `new` holds now
    _, filler = cache.admit(hashes(20, 21, 22, 23, 24), 5 * BS + 1)  # needs every block but the three held ones
    cache.publish(filler)
    assert cache.evicted == 0 and cache.overflowed == 0
    again, _ = cache.admit(hashes(1, 2, 3, 4), 4 * BS + 1)
    assert again == 3 * BS


def _random_corpus(rng: random.Random, files: int) -> dict[int, list[PlannedRequest]]:
    sessions = {}
    for f in range(files):
        own = [1000 * (f + 1) + k for k in range(30)]
        turns, blocks = [], [1, 2, 3][: rng.randrange(1, 4)]
        for t in range(rng.randrange(1, 5)):
            blocks = blocks + own[4 * t : 4 * t + rng.randrange(1, 5)]
            turns.append(
                request(
                    f"t{t}",
                    blocks,
                    preds=(f"t{t - 1}",) if t else (),
                    wait_ms=rng.randrange(0, 3000),
                    output=rng.randrange(1, 200),
                    label=str(t + 1),
                )
            )
        sessions[f] = turns
    return sessions


@pytest.mark.parametrize("seed, other_seed", [(0, 42), (1, 42), (2, 7)])
def test_replays_side_by_side_equal_each_replay_alone_and_hold_few_sessions(seed, other_seed):
    """Several configs' replays over one read: the same outcomes as each simulated alone, and, where they share the
    corpus order (one base_seed, as a dataset's configs do), at no time more sessions read but not yet started by
    every replay that runs them than the largest concurrency (replays run one after another would hold the whole
    corpus; with another base_seed a session waits until the other order reaches it)."""
    rng = random.Random(seed)
    sessions = _random_corpus(rng, 60)
    loads = [Load(2, 60), Load(5, 40, session_rate=2.0), Load(3, 60, base_seed=other_seed)]
    capacities = [None, 30 * BS, None]  # a request (11 blocks and up to 13 of output) fits alone
    alone = [
        simulate(
            sessions.__getitem__, replay_slots(60, load.base_seed, load.num_sessions), load, BlockCache(BS, capacity)
        )
        for load, capacity in zip(loads, capacities)
    ]
    seen = [[] for _ in loads]
    replays = [
        Replay(
            replay_slots(60, load.base_seed, load.num_sessions),
            load,
            single_engine(BlockCache(BS, capacity)),
            lambda outcome, _request, k=k: seen[k].append(outcome),
        )
        for k, (load, capacity) in enumerate(zip(loads, capacities))
    ]
    read, pending = [], {}
    users = {f: sum(f in r.slots for r in replays) for f in sessions}
    most = [0]

    def counted():
        def on_session(session):
            index = next(f for f, s in sessions.items() if s is session)
            pending[index] -= 1
            if not pending[index]:
                del pending[index]

        return on_session

    for r in replays:
        r.on_session = counted()

    def reader(order):
        assert sorted(order) == sorted(set().union(*(r.slots for r in replays)))
        for index in order:
            read.append(index)
            pending[index] = users[index]
            most[0] = max(most[0], len(pending))
            yield index, sessions[index]

    run_side_by_side(replays, reader)

    def admitted(outcomes):  # as admitted (on_start): simulate's also carry when each request got its answer
        return [[dataclasses.replace(o, first_token_s=None, end_s=None) for o in run] for run in outcomes]

    assert admitted(seen) == admitted(alone)
    assert not pending
    if other_seed == 42:
        assert most[0] <= max(load.concurrent_sessions for load in loads) + 1, most[0]


def test_read_order_takes_the_replays_slots_position_by_position():
    assert read_order([[3, 1, 2], [3, 1, 2, 0], [5, 3]]) == [3, 5, 1, 2, 0]


def test_aiperf_rate_is_statistics_mean_of_the_leading_run_to_the_last_bit():
    import statistics

    rng = random.Random(3)
    for _ in range(200):
        lists = [[rng.randrange(30) for _ in range(rng.randrange(0, 10))] for _ in range(rng.randrange(0, 40))]
        seen, rates = set(), []
        for ids in lists:
            if ids:
                k = 0
                while k < len(ids) and ids[k] in seen:
                    k += 1
                rates.append(k / len(ids))
                seen.update(ids)
        assert aiperf_cache_hit_rate(lists) == (statistics.mean(rates) if rates else 0.0)


def test_a_capacity_smaller_than_one_request_is_refused():
    with pytest.raises(SpecError, match="smaller than one request"):
        BlockCache(BS, capacity_tokens=2 * BS).check_fits(3 * BS, "x")


@pytest.fixture(scope="module")
def small(tmp_path_factory) -> Path:
    from e2e.suites.run import Dataset, generate

    workdir = tmp_path_factory.mktemp("analyze")
    generate(workdir, "http://127.0.0.1:9", Dataset())
    return workdir


def analyze_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "fastgen", "analyze", *args], capture_output=True, text=True, cwd=ROOT, timeout=600
    )


def test_analyze_every_config_and_stable_beats_noisy(small, tmp_path):
    out = tmp_path / "analysis.json"
    result = analyze_cli(
        str(small / "traces"), "--configs", str(small / "configs"), "--kv-cache-tokens", "4096", "--json", str(out)
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("prompts read as: template")
    doc = json.loads(out.read_text())
    configs = {c["config"]: c for c in doc["configs"]}
    assert len(configs) == 17 and doc["reading"] == "template" and doc["capacity_tokens"] == 4096
    stable, noisy = configs["scenario3/c100_stable"], configs["scenario3/c100_noisy"]
    assert stable["hit_percent_infinite"] > noisy["hit_percent_infinite"] + 5
    for c in configs.values():
        assert 0 < c["hit_percent_capacity"] <= c["hit_percent_infinite"] < 100
        assert sum(t["prompt_tokens"] for t in c["by_turn"].values()) == c["prompt_tokens"]
    # one session at a time: the capacity holds a whole session, so nothing is lost to it
    assert configs["scenario1/c1"]["hit_percent_capacity"] == configs["scenario1/c1"]["hit_percent_infinite"]


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


def test_analyze_capacity_smaller_than_a_request_is_one_line(small):
    result = analyze_cli(str(small / "traces"), "--kv-cache-tokens", "64")
    assert result.returncode == 2
    assert result.stderr.startswith("fastgen: error: a KV capacity of 64 tokens is smaller than one request")
    assert len(result.stderr.strip().splitlines()) == 1


def test_analyze_a_corrupt_trace_names_the_file(small, tmp_path):
    import shutil

    traces = tmp_path / "traces"
    shutil.copytree(small / "traces" / "scenario2_sync", traces / "scenario2_sync")
    shutil.copytree(small / "traces" / "tokenizer", traces / "tokenizer")
    victim = sorted((traces / "scenario2_sync").glob("*.json"))[0]
    victim.write_bytes(victim.read_bytes()[:500])
    result = analyze_cli(str(traces))
    assert result.returncode == 1
    assert result.stderr.startswith(f"fastgen: error: {victim} cannot be read as inference-perf reads it")


@pytest.mark.parametrize("case", ["no traces", "missing config dir", "no tokenizer", "gib without model"])
def test_analyze_bad_input_is_one_line(small, tmp_path, case):
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "tokenizer").mkdir()
    args = {
        "no traces": [str(empty), "--tokenizer", str(small / "traces" / "tokenizer")],
        "missing config dir": [str(small / "traces"), "--configs", str(tmp_path / "nope")],
        "no tokenizer": [str(small / "traces"), "--tokenizer", str(tmp_path / "missing")],
        "gib without model": [str(small / "traces"), "--kv-cache-gib", "1"],
    }[case]
    result = analyze_cli(*args)
    assert result.returncode in (1, 2) and result.stderr.startswith("fastgen: error: ")
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr


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
    from e2e.checks.traces import index_spans, load_session, request_key

    import yaml

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


def test_analyze_sweep_ends_at_the_unbounded_hit_ratio_and_draws_the_plots(small, tmp_path):
    pytest.importorskip("matplotlib")
    out = tmp_path / "analysis.json"
    result = analyze_cli(
        str(small / "traces"),
        "--only",
        "scenario3/c100_*",
        "scenario1/c10",
        "--sweep",
        "--plots",
        str(tmp_path / "plots"),
        "--json",
        str(out),
    )
    assert result.returncode == 0, result.stderr
    configs = {c["config"]: c for c in json.loads(out.read_text())["configs"]}
    assert sorted(configs) == ["scenario1/c10", "scenario3/c100_noisy", "scenario3/c100_stable"]
    for c in configs.values():
        hits = [p["hit_percent"] for p in c["sweep"]]
        capacities = [p["capacity_tokens"] for p in c["sweep"]]
        assert capacities == sorted(capacities) and len(hits) >= 4
        # room for everything the replay computes: nothing is evicted, so the unbounded cache's ratio
        assert hits[-1] == pytest.approx(c["hit_percent_infinite"])
        assert hits[0] <= hits[-1]
    names = sorted(p.name for p in (tmp_path / "plots").iterdir())
    assert names == [
        "scenario1_hit_by_capacity.png",
        "scenario1_hit_by_turn.png",
        "scenario3_hit_by_capacity.png",
        "scenario3_hit_by_turn.png",
        "stable_vs_noisy.png",
    ]


class ReferenceCache:
    """BlockCache's rules one block at a time, with plain Python containers: what the vectorized one must equal."""

    def __init__(self, capacity_blocks):
        self.capacity, self.cached, self.held, self.free = capacity_blocks, set(), {}, {}  # free: insertion order
        self.evicted = self.overflowed = 0

    def admit(self, blocks, prompt_tokens):
        limit = min(len(blocks), max(0, (prompt_tokens - 1) // BS))
        hit = 0
        while hit < limit and blocks[hit] in self.cached:
            hit += 1
        holding = list(blocks[:hit])
        for b in holding:
            self._hold(b)
        rest = list(blocks[hit:])
        for b in rest:  # computed by another request meanwhile: held before any room is made
            if b in self.cached:
                self._hold(b)
                holding.append(b)
        for b in rest:
            if b in holding:
                continue
            if len(self.cached) >= self.capacity:
                if not self.free:
                    self.overflowed += 1
                    continue
                oldest = next(iter(self.free))
                del self.free[oldest]
                self.cached.discard(oldest)
                self.evicted += 1
            self.cached.add(b)
            self._hold(b)
            holding.append(b)
        order = {b: i for i, b in enumerate(blocks)}
        return hit * BS, sorted(holding, key=order.__getitem__)

    def _hold(self, b):
        self.held[b] = self.held.get(b, 0) + 1
        self.free.pop(b, None)

    def release(self, holding):
        for b in reversed(holding):
            self.held[b] -= 1
            if not self.held[b]:
                del self.held[b]
                self.free[b] = None


@pytest.mark.parametrize("seed", range(6))
def test_block_cache_equals_a_block_by_block_reference(seed):
    """Random overlapping requests (shared prefixes, re-found blocks, a full cache) against ReferenceCache: the
    same hits, evictions and overflows at every step."""
    rng = random.Random(seed)
    capacity = rng.choice([6, 12, 40])
    cache, reference = BlockCache(BS, capacity_tokens=capacity * BS), ReferenceCache(capacity)
    running = []
    prefixes = [list(range(100 * p, 100 * p + 30)) for p in range(4)]
    for _ in range(300):
        if running and (rng.random() < 0.45 or len(running) > 4):
            held, ref_held = running.pop(rng.randrange(len(running)))
            cache.release(held)
            reference.release(ref_held)
            continue
        prefix = rng.choice(prefixes)
        blocks = prefix[: rng.randrange(1, 12)] + [rng.randrange(10_000, 10_050) for _ in range(rng.randrange(0, 4))]
        blocks = list(dict.fromkeys(blocks))  # a chain never repeats a block
        tokens = len(blocks) * BS + rng.choice([0, 5])
        got, held = cache.admit(np.asarray(blocks), tokens)
        cache.publish(held)
        want, ref_held = reference.admit(blocks, tokens)
        assert got == want
        assert sorted(held.held.tolist()) == sorted(ref_held)
        assert (cache.evicted, cache.overflowed) == (reference.evicted, reference.overflowed)
        running.append((held, ref_held))


def test_block_ids_give_forgotten_ids_to_new_hashes_and_keep_the_others():
    ids = BlockIds()
    rng = np.random.default_rng(11)
    live: dict[int, int] = {}
    for round_ in range(60):  # enough to rebuild the table several times, tombstones and all
        batch = np.unique(rng.integers(0, 2**63, 3000, dtype=np.uint64))
        got = ids.of_distinct(batch)
        for h, i in zip(batch.tolist(), got.tolist()):
            assert live.setdefault(h, i) == i
        assert len(set(live.values())) == len(live) == len(ids)  # no id names two hashes
        assert max(live.values()) < 2 * 3000 + 3000  # forgotten ids are reused: the ids stay few
        gone = [h for h in live if rng.random() < 0.7] if round_ % 2 else []
        forgotten = ids.forget(np.asarray(gone, dtype=np.uint64))
        assert sorted(forgotten.tolist()) == sorted(live.pop(h) for h in gone)
    again = ids.of(np.asarray(list(live), dtype=np.uint64))  # the kept ones are found, not numbered anew
    assert again.tolist() == list(live.values())


def test_a_forgotten_block_keeps_its_room_until_it_is_evicted():
    cache = BlockCache(BS, capacity_tokens=4 * BS)
    _, a = cache.admit(hashes(1, 2, 3), 3 * BS + 1)
    cache.publish(a)
    cache.release(a)
    cache.forget(hashes(1, 2, 3))  # ids 1, 2 and 3 will name other blocks
    got, b = cache.admit(hashes(1, 2, 3), 3 * BS + 1)
    assert got == 0  # not the blocks that were cached under those ids
    cache.publish(b)
    assert cache.evicted == 2  # three new blocks, one free block: two of the forgotten ones made room
    assert cache.used_tokens == 4 * BS


def test_shared_blocks_never_call_a_hash_of_two_sessions_single():
    rng = np.random.default_rng(5)
    common = rng.integers(0, 2**63, 200, dtype=np.uint64)
    sessions = [
        np.unique(np.concatenate([common[: rng.integers(0, 200)], rng.integers(0, 2**63, 2000, dtype=np.uint64)]))
        for _ in range(300)
    ]
    shared = SharedBlocks()
    for session in sessions:
        shared.add_session(session)
    counts: dict[int, int] = {}
    for session in sessions:
        for h in session.tolist():
            counts[h] = counts.get(h, 0) + 1
    every = np.asarray(list(counts), dtype=np.uint64)
    single = shared.single(every)
    many = np.asarray([counts[h] > 1 for h in counts.keys()])
    assert many.any() and not (single & many).any()  # never wrong about a shared hash
    assert single[~many].mean() > 0.95  # and right about nearly all the others (false positives cost memory)


def test_block_ids_number_hashes_densely_in_first_seen_order():
    ids = BlockIds()
    rng = np.random.default_rng(7)
    pool = rng.integers(0, 2**63, 5000, dtype=np.uint64) * np.uint64(2)  # many collisions modulo the table size
    pool[:50] = np.arange(50, dtype=np.uint64) << np.uint64(40)  # equal low bits: one long probe run
    want: dict[int, int] = {}
    for _ in range(40):  # batches that repeat earlier hashes and themselves, across several table growths
        batch = rng.choice(pool, rng.integers(1, 600))
        expected = [want.setdefault(int(h), len(want)) for h in batch.tolist()]
        assert ids.of(batch).tolist() == expected
    assert len(ids) == len(want)


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


# --- issue 24: the answer first (summary, binding line, knee), the long tables behind --verbose, plots that mark the
# capacity, and the service model as options (given, or calibrated from a bakeoff run)


SUMMARY_ONLY = ("--only", "scenario1/c1", "scenario1/c10", "scenario3/c100_*")


def test_analyze_summary_says_the_speeds_and_names_the_configs_the_capacity_binds(small, tmp_path):
    out = tmp_path / "analysis.json"
    result = analyze_cli(str(small / "traces"), *SUMMARY_ONLY, "--kv-cache-tokens", "4096", "--json", str(out))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert "service model: prefill 20,000 tokens/s, decode 50.0 tokens/s (the defaults)" in result.stdout
    assert "binds: more than 1 point lost" in result.stdout
    doc = json.loads(out.read_text())
    configs = {c["config"]: c for c in doc["configs"]}
    bound = [name for name, c in configs.items() if c["hit_percent_infinite"] - c["hit_percent_capacity"] > 1.0]
    assert "scenario1/c1" not in bound and "scenario3/c100_noisy" in bound  # one of each, for the line to be tested
    (line,) = [x for x in lines if x.startswith("the KV capacity of 4,096 tokens binds")]
    assert line.endswith(
        f"binds {len(bound)} of {len(configs)} configs (at-capacity hit % more than 1 point below "
        f"unbounded): {', '.join(bound)}"
    )
    rows = {x.split()[0]: x.split() for x in lines if x.split() and x.split()[0] in configs}
    for name, c in configs.items():
        assert c["capacity_binds"] == (name in bound)
        assert rows[name][-2:] == [f"{c['capacity_cost_points']:.1f}", "yes" if name in bound else "no"]
    assert doc["binds_above_points"] == 1.0 and doc["service_model"]["source"] == "the defaults"


@pytest.mark.parametrize("verbose", [False, True])
def test_analyze_long_tables_reach_the_terminal_only_with_verbose(small, tmp_path, verbose):
    out = tmp_path / "analysis.json"
    result = analyze_cli(
        str(small / "traces"), "--only", "scenario2/c10_sync", "--json", str(out), *(["--verbose"] if verbose else [])
    )
    assert result.returncode == 0, result.stderr
    assert ("by turn (scenario 2: 0 is the root, 1-5 the branches)" in result.stdout) == verbose
    assert ("by turn: --verbose, or in --json" in result.stdout) != verbose
    by_turn = json.loads(out.read_text())["configs"][0]["by_turn"]
    assert len(by_turn) == 6  # the JSON holds the table either way: the root and five branches
    assert (len(result.stdout.splitlines()) > 6 + 6) == verbose


def _result(name, prompt, cached_infinite, cached_capacity=None, sweep=(), by_label=None):
    from fastgen.analysis import TargetResult

    return TargetResult(
        name,
        "t",
        1,
        requests=1,
        prompt_tokens=prompt,
        cached_infinite=cached_infinite,
        cached_capacity=cached_capacity,
        sweep=list(sweep),
        by_label=by_label or {},
    )


def test_knee_is_the_smallest_swept_capacity_within_one_point_of_unbounded():
    from fastgen.analysis.summary import knee, summary_cells
    from fastgen.analysis import AnalysisOptions

    reached = _result("a", 1000, 800, sweep=[(100, 20.0), (200, 78.9), (400, 79.0), (800, 80.0)])
    never = _result("b", 1000, 800, sweep=[(100, 20.0), (200, 78.0)])
    assert knee(reached) == 400 and knee(never) is None
    options = AnalysisOptions(sweep=True)
    assert summary_cells(reached, options) == ("400",)
    assert summary_cells(never, options) == ("beyond the sweep",)


def test_analyze_sweep_prints_each_configs_knee(small, tmp_path):
    out = tmp_path / "analysis.json"
    result = analyze_cli(str(small / "traces"), "--only", "scenario3/c100_noisy", "--sweep", "--json", str(out))
    assert result.returncode == 0, result.stderr
    (config,) = json.loads(out.read_text())["configs"]
    want = min(
        p["capacity_tokens"] for p in config["sweep"] if p["hit_percent"] >= config["hit_percent_infinite"] - 1.0
    )
    assert config["knee_capacity_tokens"] == want
    (row,) = [x for x in result.stdout.splitlines() if x.startswith("scenario3/c100_noisy")]
    assert row.split()[-1] == f"{want:,}"
    assert "knee: the smallest swept KV capacity within 1 point of hit % infinite" in result.stdout


def test_analysis_plots_mark_the_capacity_and_draw_by_turn_at_it():
    pytest.importorskip("matplotlib")
    import matplotlib.pyplot as plt

    from fastgen.analysis.plots import analysis_plots
    from fastgen.results.plots import draw_plot

    sweep = [(12_000, 30.0), (60_000, 55.0), (300_000, 70.0), (1_500_000, 80.0), (7_500_000, 80.0)]
    results = [_result("scenario3/c500_noisy", 1000, 800, 300, sweep, {"1": [500, 300, 100], "2": [500, 500, 200]})]
    plots = {p.name: p for p in analysis_plots(results, {"scenario3/c500_noisy": sweep}, capacity_tokens=420_000)}
    assert sorted(plots) == [
        "scenario3_hit_by_capacity",
        "scenario3_hit_by_turn",
        "scenario3_hit_by_turn_at_capacity",
        "stable_vs_noisy",
    ]
    assert plots["scenario3_hit_by_turn"].series == {"scenario3/c500_noisy": [60.0, 100.0]}
    assert plots["scenario3_hit_by_turn_at_capacity"].series == {"scenario3/c500_noisy": [20.0, 40.0]}
    capacity = plots["scenario3_hit_by_capacity"]
    assert capacity.marks == {"KV capacity asked for: 420,000 tokens": 420_000} and capacity.x_tokens
    figure = draw_plot(capacity)
    try:
        figure.canvas.draw()
        (axes,) = figure.axes
        (mark,) = [line for line in axes.get_lines() if line.get_label() == "KV capacity asked for: 420,000 tokens"]
        assert list(mark.get_xdata()) == [420_000, 420_000]
        assert "KV capacity asked for: 420,000 tokens" in [t.get_text() for t in axes.get_legend().get_texts()]
        low, high = axes.get_xlim()
        shown = [t for t in axes.get_xticklabels() if t.get_text() and low <= t.get_position()[0] <= high]
        assert [t.get_text() for t in shown] == ["20K", "50K", "100K", "200K", "500K", "1M", "2M", "5M"]
        boxes = [t.get_window_extent() for t in shown]
        assert not any(a.overlaps(b) for a, b in zip(boxes, boxes[1:]))  # legible: no label touches the next
    finally:
        plt.close(figure)
    unbounded_only = analysis_plots(results, {"scenario3/c500_noisy": sweep})
    assert [p.marks for p in unbounded_only if p.name == "scenario3_hit_by_capacity"] == [{}]
    assert "scenario3_hit_by_turn_at_capacity" not in [p.name for p in unbounded_only]


def test_a_slower_prefill_keeps_a_request_running_and_the_next_waits_for_its_room():
    """a1 (3 blocks) starts at 0 s; b1 (3 other blocks) at 2 s, in a cache of 4 blocks. Fast, a1 has ended when b1
    arrives: b1 is admitted at once. At 10 prefill tokens/s a1's prefill takes 4.8 s: b1 does not fit beside it and is
    admitted when a1 ends (simulated seconds, not wall). Either way b1 then evicts a1's tail, and a2 finds one block."""
    from fastgen.analysis.schedule import ServiceModel

    a1 = request("a1", [1, 2, 3], output=0, extra=0)
    a2 = request("a2", [1, 2, 3, 4], preds=("a1",), wait_ms=15_000, label="2", output=0, extra=0)
    b1 = request("b1", [7, 8, 9], output=0, extra=0)
    sessions = {0: [a1, a2], 1: [b1]}
    load = Load(2, 2, session_rate=0.5)

    def run(service):
        outcomes = simulate(sessions.__getitem__, [0, 1], load, BlockCache(BS, capacity_tokens=4 * BS), service)
        return {o.event_id: o for o in outcomes}

    fast, slow = run(ServiceModel()), run(ServiceModel(prefill_tokens_per_s=10.0))
    assert fast["b1"].start_s == slow["b1"].start_s == 2.0
    assert fast["b1"].admitted_s == pytest.approx(2.0, abs=0.001)  # the front end's tokenizing, 24 microseconds
    assert slow["b1"].admitted_s == pytest.approx(slow["a1"].end_s) == pytest.approx(4.8, abs=0.001)
    assert fast["a2"].cached_tokens == slow["a2"].cached_tokens == 1 * BS


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


@pytest.mark.parametrize("speeds", [(0.0, 50.0), (20000.0, -1.0), (float("nan"), 50.0)])
def test_a_service_model_refuses_a_speed_that_is_not_positive(speeds):
    from fastgen.analysis.schedule import ServiceModel

    with pytest.raises(SpecError, match="must be a positive number"):
        ServiceModel(*speeds)


def test_generated_tokens_take_room_while_running_and_are_evicted_before_the_prompt_they_follow():
    # room for 6 blocks: a 4-block prompt generating 2 blocks fills it; the next request's new blocks evict the
    # generated ones first (freed first, as vLLM frees a sequence's tail first), so the prompt's prefix survives
    cache = BlockCache(BS, capacity_tokens=6 * BS)
    _, first = cache.admit(hashes(1, 2, 3, 4), 4 * BS + 5)
    cache.publish(first, output_tokens=2 * BS)
    assert cache.used_tokens == 6 * BS
    cache.release(first)
    cached, second = cache.admit(hashes(1, 2, 7, 8), 4 * BS + 5)
    cache.publish(second)
    assert cached == 2 * BS and cache.evicted == 2  # the two generated blocks, not blocks 3 and 4
    cache.release(second)
    third, _ = cache.admit(hashes(1, 2, 3, 4), 4 * BS + 5)
    assert third == 4 * BS
    # without the generated blocks' room, nothing would have been evicted at all
    plain = BlockCache(BS, capacity_tokens=6 * BS)
    _, hold = plain.admit(hashes(1, 2, 3, 4), 4 * BS + 5)
    plain.publish(hold)
    plain.release(hold)
    _, hold = plain.admit(hashes(1, 2, 7, 8), 4 * BS + 5)
    plain.publish(hold)
    assert plain.evicted == 0
