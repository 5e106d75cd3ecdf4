"""e2e/engines/fake_engine.py: the fake engine's metrics, jitter, failures and answer lengths."""

from __future__ import annotations

import json
import statistics

import pytest
from _support.bakeoff import MODEL

from e2e.engines.server import ServerThread
from fastgen.bakeoff.sampler import parse_metrics


def test_fake_sglang_exports_its_kv_usage_rounded_and_as_a_count_and_jitters_from_its_seed():
    from e2e.engines.fake_engine import EngineProfile, EngineState

    state = EngineState(EngineProfile(flavour="sglang", kv_capacity_tokens=10_000), "m")
    state.cache.lookup_and_insert(list(range(1234)))
    sample = parse_metrics(state.metrics_text().decode(), "sglang:")
    # 1,232 tokens of whole 16-token blocks in use: 12.32 %, exported as 0.12 (SGLang's round(usage, 2))
    assert sample["sglang:num_used_tokens"] == 1232 and sample["sglang:token_usage"] == 0.12
    draws = [
        [EngineState(EngineProfile(prefill_s_per_token=1e-3, jitter_s=0.01, seed=seed), "m").prefill_wait(10)]
        for seed in (1, 1, 2)
    ]
    assert draws[0] == draws[1] != draws[2] and all(d[0] > 0.01 for d in draws)  # 10 ms of prefill, then a draw
    many = EngineState(EngineProfile(jitter_s=0.01, seed=5), "m")
    assert statistics.mean(many.prefill_wait(0) for _ in range(4000)) == pytest.approx(0.01, rel=0.1)
    assert EngineState(EngineProfile(prefill_s_per_token=1e-3), "m").prefill_wait(10) == pytest.approx(0.01)


def test_fake_engine_fails_every_nth_request_and_scales_its_answers(dataset):
    from e2e.engines.fake_engine import EngineProfile
    from fastgen.bakeoff.server import fetch

    body = {"model": MODEL, "messages": [{"role": "user", "content": "hello there"}], "max_tokens": 40}
    for scale, tokens in ((1.0, 40), (0.5, 20), (0.01, 1)):
        profile = EngineProfile(fail_every=2, output_scale=scale)
        with ServerThread(dataset / "traces" / "tokenizer", profile=profile) as thread:
            url = thread.base_url + "/v1/chat/completions"
            first, second = (fetch(url, method="POST", json_body=body) for _ in range(2))
        assert (first.status, second.status) == (200, 500)
        assert json.loads(first.body)["usage"]["completion_tokens"] == tokens
