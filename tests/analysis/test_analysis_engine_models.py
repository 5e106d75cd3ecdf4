"""analysis/engine_models.py, with engine_base.py, engine_vllm.py and engine_sglang.py: vLLM's and SGLang's
schedulers as the replay's engine applies them, rule by rule (rules.py names each with its source)."""

from __future__ import annotations

import math
import random
from dataclasses import replace
from typing import Optional

import numpy as np
import pytest

from fastgen.analysis.cache import BlockCache, BlockIds
from fastgen.analysis.engine_base import Served
from fastgen.analysis.engine_models import make_engine
from fastgen.analysis.routing import Fleet
from fastgen.analysis.rules import ENGINE_RULES, SchedulerSettings
from fastgen.analysis.step_time import ServiceModel
from fastgen.traces.blocks import block_hashes

IDS = BlockIds()
# 10 tokens: 10 ms; a decode step 10 ms; a front end that takes no time (requests sent together arrive together)
SLOW = ServiceModel(prefill_tokens_per_s=1_000.0, decode_tokens_per_s=100.0, ingest_tokens_per_s=math.inf)


def tokens(*parts) -> np.ndarray:
    return np.concatenate([np.arange(a, b) for a, b in parts]).astype(np.uint32)


def drive(
    engine: str,
    arrivals: list[tuple[float, str, np.ndarray, int]],
    *,
    block_size: int = 10,
    capacity: Optional[int] = None,
    settings: SchedulerSettings = SchedulerSettings(),
    service: ServiceModel = SLOW,
    max_new: Optional[dict] = None,
    noise: Optional[random.Random] = None,
):
    """Send (time, name, prompt tokens, output tokens) to one engine: name -> (hit, admitted, first token, end), and
    the engine."""
    cache = BlockCache(block_size, capacity, publish_after_prefill=ENGINE_RULES[engine].publish_after_prefill)
    replica = make_engine(ENGINE_RULES[engine], settings, cache, service, noise=noise, step_cv=0.2 if noise else 0.0)
    fleet = Fleet([replica])
    got: dict = {}
    fleet.connect(
        lambda served, t, _r: got.__setitem__(served.ref, [served.hit, t, None, None]),
        lambda served, t: got[served.ref].__setitem__(slice(2, 4), [served.first_token_s, t]),
    )
    pending = sorted(arrivals, key=lambda a: a[0])
    index = 0
    while True:
        when, what = fleet.next_time()
        arrival = pending[index][0] if index < len(pending) else math.inf
        if when == arrival == math.inf:
            break
        if when < arrival or (when == arrival and what == 0):
            fleet.advance()
            continue
        t, name, prompt, output = pending[index]
        blocks = IDS.of(block_hashes(prompt, block_size))
        wanted = (max_new or {}).get(name, output)
        fleet.submit(
            Served(name, blocks, prompt=len(prompt), output=output, max_new=wanted, arrival=t, seq=index), name, t
        )
        index += 1
    return {name: tuple(values) for name, values in got.items()}, replica


def test_vllm_registers_each_chunk_when_it_is_scheduled_and_sglang_when_its_batch_ends():
    # A: 100 tokens prefilled in chunks of 60 then 40; B (A's first 100 tokens and 20 of its own) arrives during
    # the first chunk. vLLM schedules A's second chunk before B in the next step: both chunks are registered when
    # B looks up, so B hits 9 blocks. SGLang's tree has only the first chunk when B's batch forms: 6 pages.
    a = tokens((0, 100))
    b = tokens((0, 100), (500, 520))
    arrivals = [(0.0, "A", a, 5), (0.001, "B", b, 5)]
    budget = SchedulerSettings(batch_tokens=60)
    vllm, _ = drive("vllm", arrivals, settings=budget)
    sglang, _ = drive("sglang", arrivals, settings=budget)
    assert vllm["B"][0] == 100 and sglang["B"][0] == 60
    assert vllm["A"][1] == 0.0 and vllm["B"][1] == pytest.approx(0.06)  # admitted when the first step ended


def test_a_step_computes_at_most_the_budget_so_a_long_prompt_delays_its_first_token():
    prompt = tokens((0, 300))
    whole, _ = drive("vllm", [(0.0, "A", prompt, 1)], settings=SchedulerSettings(batch_tokens=None))
    chunked, engine = drive("vllm", [(0.0, "A", prompt, 1)], settings=SchedulerSettings(batch_tokens=100))
    assert whole["A"][2] == pytest.approx(0.3) and chunked["A"][2] == pytest.approx(0.3)  # the same tokens
    assert engine.steps == 3  # in three steps of 100


def test_vllm_admits_only_a_prompt_that_fits_whole_in_fcfs_order_and_decides_its_hit_then():
    # 10 blocks. A (55 tokens: 6 blocks) runs; B (60 unrelated tokens: 6 blocks) does not fit beside it and waits;
    # C (A's first 50 tokens and 10 of its own) would fit but waits behind B (FCFS). When A ends, B and the block
    # its 4 generated tokens start evict A's tail (its partial block, then its 5th and 4th blocks: freed tail
    # first); C, admitted once B has ended too, finds A's first three blocks, not the five it would have at once.
    a, b, c = tokens((0, 55)), tokens((700, 760)), tokens((0, 50), (900, 910))
    got, _ = drive("vllm", [(0.0, "A", a, 4), (0.001, "B", b, 4), (0.002, "C", c, 4)], capacity=100)
    assert got["A"][3] <= got["B"][1] and got["B"][3] <= got["C"][1]
    assert (got["B"][0], got["C"][0]) == (0, 30)
    roomy, _ = drive("vllm", [(0.0, "A", a, 4), (0.001, "B", b, 4), (0.002, "C", c, 4)], capacity=1000)
    assert roomy["C"][1] < roomy["A"][3] and roomy["C"][0] == 50  # admitted at once: A's blocks registered


def test_vllm_preempts_the_newest_running_request_when_a_decode_block_is_missing():
    # two 45-token prompts fit 10 blocks (5 each); generating 40 tokens each needs 4 more blocks each: the newest is
    # preempted (its blocks freed, it waits and is recomputed), and its hit is the one of its first admission
    a, b = tokens((0, 45)), tokens((1000, 1045))
    got, engine = drive("vllm", [(0.0, "A", a, 40), (0.0, "B", b, 40)], capacity=100)
    assert engine.preempted >= 1
    assert got["A"][3] < got["B"][3]  # B, preempted, ends last
    assert got["B"][0] == 0 and all(v[3] is not None for v in got.values())


def test_sglang_reserves_decode_room_for_running_requests_and_waits_for_one_to_leave():
    # a 200-token pool; A (50 tokens, max_tokens 100) runs, reserving 0.7 x its remaining max_tokens; B (50 + 100 +
    # a page) does not fit beside it, so B waits until A has ended (no prefill is tried again before that). vLLM's
    # rule (the prompt fits) admits B at once.
    a, b = tokens((0, 50)), tokens((2000, 2050))
    arrivals = [(0.0, "A", a, 100), (0.02, "B", b, 100)]
    sglang, engine = drive("sglang", arrivals, block_size=1, capacity=200)
    vllm, _ = drive("vllm", arrivals, block_size=1, capacity=200)
    assert sglang["B"][1] >= sglang["A"][3] and engine.batch_full is False
    assert vllm["B"][1] < vllm["A"][3]


def test_sglang_retracts_the_request_with_the_fewest_generated_tokens_when_a_decode_step_does_not_fit():
    # no decode room reserved for running requests (ratio 0): B, arriving during A's prefill, fits the 150-token pool
    # beside A (60 + 30 + a page < 150 - 51); decoding 30 tokens each outgrows it, and B (as few tokens generated,
    # the longer prompt) is retracted, then served again
    a, b = tokens((0, 50)), tokens((3000, 3060))
    settings = SchedulerSettings(new_token_ratio=(0.0, 0.0, 600))
    got, engine = drive(
        "sglang", [(0.0, "A", a, 30), (0.001, "B", b, 30)], block_size=1, capacity=150, settings=settings
    )
    assert engine.preempted >= 1 and all(v[3] is not None for v in got.values())
    assert got["A"][3] < got["B"][3]
    reserving, engine = drive("sglang", [(0.0, "A", a, 30), (0.001, "B", b, 30)], block_size=1, capacity=150)
    assert engine.preempted == 0 and reserving["B"][1] >= reserving["A"][3]  # the default ratio kept B waiting


def test_sglang_lpm_defers_a_request_that_shares_a_prefix_with_an_earlier_waiting_one():
    # R1 and R2 share 40 tokens, S is unrelated; a batch fits two. FCFS batches R1 and R2 together: R2 computes the
    # shared tokens too. LPM defers R2 behind S (in-batch prefix caching), so R2 finds R1's tokens in the tree.
    r1, r2, s = tokens((0, 40), (100, 110)), tokens((0, 40), (200, 210)), tokens((5000, 5050))
    arrivals = [(0.0, "R1", r1, 2), (0.0, "R2", r2, 2), (0.0, "S", s, 2)]
    fcfs, _ = drive("sglang", arrivals, block_size=1, settings=SchedulerSettings(batch_tokens=100))
    lpm, _ = drive("sglang", arrivals, block_size=1, settings=SchedulerSettings(batch_tokens=100, policy="lpm"))
    assert fcfs["R2"][0] == 0 and lpm["R2"][0] == 40
    assert lpm["S"][1] < lpm["R2"][1]


def test_an_arrival_cuts_a_run_of_decode_steps_short_at_the_next_step_boundary():
    # A decodes 100 tokens (10 ms a step) from 10 ms on; B arrives at 205 ms and joins at the step boundary at
    # 210 ms, not when A's run would have ended
    got, _ = drive("vllm", [(0.0, "A", tokens((0, 10)), 100), (0.205, "B", tokens((50, 60)), 1)])
    assert got["B"][1] == pytest.approx(0.21)
    assert got["A"][3] == pytest.approx(0.01 + 100 * 0.01, abs=0.011)  # B's step costs A one step's length


def test_the_front_end_tokenizes_one_request_at_a_time_so_requests_sent_together_reach_steps_apart():
    # two 1,000-token prompts sharing 900 tokens, sent together: with no front-end time they share a step (vLLM
    # registers the first's blocks before the second looks up: a hit either way); SGLang computes the shared tokens
    # in both unless the front end (1,000 tokens in 10 ms) hands the second over after the first batch has begun
    a, b = tokens((0, 900), (2000, 2100)), tokens((0, 900), (3000, 3100))
    arrivals = [(0.0, "A", a, 2), (0.0, "B", b, 2)]
    together, _ = drive("sglang", arrivals, block_size=1)
    apart, _ = drive("sglang", arrivals, block_size=1, service=replace(SLOW, ingest_tokens_per_s=100_000.0))
    assert together["B"][0] == 0 and apart["B"][0] == 900
    assert apart["B"][1] == pytest.approx(apart["A"][2]) == pytest.approx(0.01 + 1.0)  # admitted as A's batch ends


def test_noisy_steps_are_seeded():
    arrivals = [(0.001 * k, f"R{k}", tokens((0, 40), (100 * k, 100 * k + 30)), 20) for k in range(8)]
    one, _ = drive("vllm", arrivals, capacity=200, noise=random.Random(3))
    again, _ = drive("vllm", arrivals, capacity=200, noise=random.Random(3))
    other, _ = drive("vllm", arrivals, capacity=200, noise=random.Random(4))
    assert one == again and one != other


def test_every_engine_default_is_stated():
    for rules in ENGINE_RULES.values():
        assert rules.defaults.batch_tokens and "80 GB" in rules.defaults_from
    assert replace(ENGINE_RULES["sglang"].defaults, policy="lpm").describe("sglang").count("schedule_policy lpm") == 1
