"""bakeoff/sampler.py: the engines' Prometheus /metrics read into samples."""

from __future__ import annotations


import pytest

from fastgen.bakeoff.sampler import parse_metrics


def test_parse_metrics_keeps_the_engines_counters_and_gauges_summed_over_labels(dataset):
    from e2e.engines.fake_engine import EngineProfile, EngineState

    state = EngineState(EngineProfile(flavour="vllm", kv_capacity_tokens=1000), "m")
    state.cache.lookup_and_insert(list(range(40)))
    state.cache.lookup_and_insert(list(range(40)))
    text = state.metrics_text().decode()
    line = next(x for x in text.splitlines() if x.startswith("vllm:num_requests_running{"))
    text = text.replace(line, line + '\nvllm:num_requests_running{engine="1",model_name="other"} 2.0')  # a 2nd engine
    sample = parse_metrics(text, "vllm:")
    assert sample["vllm:prefix_cache_queries_total"] == 80 and sample["vllm:prefix_cache_hits_total"] == 32
    assert sample["vllm:num_requests_running"] == 2 and sample["vllm:kv_cache_usage_perc"] == pytest.approx(0.032)
    assert not any(name.endswith("_created") for name in sample)
    assert not any(
        name.startswith("python_") for name in parse_metrics("python_gc_objects_collected_total 3\n", "vllm:")
    )
