"""analysis/rules.py: each engine's cache rules, as the schedule and the cache apply them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from _support import ROOT
from fastgen.analysis import AnalysisOptions
from fastgen.analysis.cache import BlockIds
from fastgen.analysis.rules import ENGINE_RULES
from fastgen.analysis.schedule import Load, PlannedRequest, ServiceModel, simulate
from fastgen.traces.blocks import block_hashes


IDS = BlockIds()  # one numbering for every test: equal hashes, equal ids


def planned(event: str, tokens: np.ndarray, block_size: int, *, preds=(), wait_ms=0, output=10) -> PlannedRequest:
    blocks = IDS.of(block_hashes(tokens.astype(np.uint32), block_size))
    return PlannedRequest(event, tuple(preds), wait_ms, blocks, len(tokens), output, event)


# a front end that takes no time: requests sent together reach the scheduler together (engine.py's tests time it)
INSTANT = ServiceModel(ingest_tokens_per_s=float("inf"))


def cached_of(
    engine: str,
    requests: list[PlannedRequest],
    block_size: int,
    *,
    concurrent: int = 1,
    service: ServiceModel = INSTANT,
) -> dict[str, int]:
    cache = AnalysisOptions(block_size=block_size, engine=engine).cache()
    sessions = [[r] for r in requests]
    outcomes = simulate(
        lambda i: sessions[i], list(range(len(sessions))), Load(concurrent, len(sessions)), cache, model=service
    )
    return {o.event_id: o.cached_tokens for o in outcomes}


PREFIX = np.arange(1000, 1040)  # 40 shared tokens: two full blocks of 16 and 8 more


def two_prompts(block_size: int) -> list[PlannedRequest]:
    return [
        planned("a", np.concatenate([PREFIX, np.arange(10)]), block_size),
        planned("b", np.concatenate([PREFIX, np.arange(50, 60)]), block_size),
    ]


def test_sglang_pages_of_one_token_hit_mid_block_where_vllm_stops_at_the_last_full_block():
    # one session after the other: the first has ended, whatever its publish rule, when the second starts
    assert cached_of("vllm", two_prompts(16), 16) == {"a": 0, "b": 32}
    assert cached_of("sglang", two_prompts(1), 1) == {"a": 0, "b": 40}


def test_requests_that_start_together_share_a_prefix_under_vllms_rules_and_compute_it_each_under_sglangs():
    assert cached_of("vllm", two_prompts(16), 16, concurrent=2)["b"] == 32  # registered when scheduled
    assert cached_of("sglang", two_prompts(1), 1, concurrent=2)["b"] == 0  # inserted when its prefill completes


def test_under_sglangs_rules_a_request_that_arrives_during_a_prefill_batch_waits_for_the_next_and_hits_it():
    # the second session waits 10 ms: it misses the first's prefill batch (one step, however long) and is admitted
    # after it, when the batch's tokens are in the radix tree; arriving together they share one batch and no hit
    first = planned("a", np.concatenate([PREFIX, np.arange(10)]), 1)
    second = planned("b", np.concatenate([PREFIX, np.arange(50, 60)]), 1, wait_ms=10)
    for prefill in (10_000, 500):  # a 5 ms or a 100 ms batch
        service = ServiceModel(prefill_tokens_per_s=prefill, ingest_tokens_per_s=float("inf"))
        assert cached_of("sglang", [first, second], 1, concurrent=2, service=service)["b"] == 40
    together = planned("b", np.concatenate([PREFIX, np.arange(50, 60)]), 1)
    assert cached_of("sglang", [first, together], 1, concurrent=2)["b"] == 0


def test_every_engine_rule_describes_its_unit_and_when_it_publishes_and_names_its_source():
    assert ENGINE_RULES["vllm"].describe(32).startswith("vllm's rules: blocks of 32 tokens")
    assert "page size 1" in ENGINE_RULES["sglang"].describe(1)
    assert "prefill chunk completes" in ENGINE_RULES["sglang"].describe(1)
    assert "scheduled" in ENGINE_RULES["vllm"].describe(16)
    for rules, root in ((ENGINE_RULES["vllm"], "v1/"), (ENGINE_RULES["sglang"], "srt/")):
        names = [rule.name for rule in rules.rules]
        assert {"admission", "hit", "publication", "eviction"} <= set(names)
        assert all(rule.source.startswith(root) and ".py" in rule.source for rule in rules.rules)


@pytest.fixture(scope="module")
def small(tmp_path_factory) -> Path:
    from e2e.suites.run import Dataset, generate

    workdir = tmp_path_factory.mktemp("rules")
    generate(workdir, "http://127.0.0.1:9", Dataset())
    return workdir


def test_analyze_engine_sglang_records_its_rules_and_page_size_for_compare(small, tmp_path):
    out = tmp_path / "sglang.json"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "fastgen",
            "analyze",
            str(small / "traces"),
            "--configs",
            str(small / "configs"),
            "--only",
            "scenario2/c10_sync",
            "--engine",
            "sglang",
            "--json",
            str(out),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr
    doc = json.loads(out.read_text())
    assert doc["engine"] == "sglang" and doc["block_size"] == 1
    assert doc["rules"].startswith("sglang's rules: radix cache at page size 1")
    from fastgen.results.ceilings import read_ceilings

    ceilings, problems = read_ceilings(out)
    assert not problems and "sglang's rules" in ceilings.describe()


def test_analyze_refuses_an_engine_with_aiperfs_definition(small):
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "fastgen",
            "analyze",
            str(small / "traces"),
            "--engine",
            "sglang",
            "--definition",
            "aiperf",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=600,
    )
    assert result.returncode != 0 and "drop --engine" in result.stderr
