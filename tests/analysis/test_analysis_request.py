"""analysis.request: what an analysis is asked, checked from plain values; each refusal a SpecError naming the flag."""

from __future__ import annotations

from pathlib import Path

import pytest
from _support.analysis import fleet_record

from fastgen.analysis import ConfigTarget
from fastgen.analysis.request import all_config_targets, analysis_options, dataset_targets, matching_targets
from fastgen.analysis.rules import ENGINE_RULES
from fastgen.errors import SpecError


def _targets(*names: str) -> list[ConfigTarget]:
    return [ConfigTarget(name=n, trace_dir=Path("unused"), load=None) for n in names]  # type: ignore[arg-type]


def test_matching_targets_scenario_alone_names_its_configs() -> None:
    kept = matching_targets(_targets("scenario1/c10", "scenario1/c20", "scenario3/c1"), ["scenario1"])
    assert [t.name for t in kept] == ["scenario1/c10", "scenario1/c20"]


def test_matching_targets_none_raises_with_patterns() -> None:
    with pytest.raises(SpecError, match="no config matches scenario9/x"):
        matching_targets(_targets("scenario1/c10"), ["scenario9/x"])


def test_dataset_targets_not_a_folder_raises(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="is not a folder"):
        dataset_targets(tmp_path / "missing")


def test_dataset_targets_without_tokenizer_raises(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match=f"no tokenizer at {tmp_path.parent / 'tokenizer'}"):
        dataset_targets(tmp_path)


def test_all_config_targets_without_configs_is_none(tmp_path: Path) -> None:
    assert all_config_targets(tmp_path / "traces") is None


def test_analysis_options_defaults_are_the_engines() -> None:
    options = analysis_options(engine="sglang")
    rules = ENGINE_RULES["sglang"]
    assert (options.engine, options.block_size, options.settings) == (
        "sglang",
        rules.default_block_size,
        rules.defaults,
    )


def test_analysis_options_given_settings_replace_the_defaults() -> None:
    options = analysis_options(engine="sglang", batch_tokens=4096, schedule_policy="lpm")
    assert (options.settings.batch_tokens, options.settings.policy) == (4096, "lpm")


def test_analysis_options_aiperf_has_no_band_and_mooncake_blocks() -> None:
    options = analysis_options(definition="aiperf", band=8)
    assert (options.band, options.block_size) == (0, 512)


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ({"kv_cache_gib": 1.0}, "--kv-cache-gib needs --model-config"),
        ({"definition": "aiperf", "kv_cache_tokens": 1000}, "AIPerf's definition has no capacity"),
        ({"definition": "aiperf", "engine": "sglang"}, "AIPerf's definition has no engine rules"),
        ({"schedule_policy": "lpm"}, "--schedule-policy lpm is SGLang's"),
    ],
)
def test_analysis_options_refusals_name_the_flag(given: dict, message: str) -> None:
    with pytest.raises(SpecError, match=message):
        analysis_options(**given)


def test_analysis_options_from_a_fleets_runs_are_the_fleets_unless_flags_say_otherwise(tmp_path) -> None:
    from dataclasses import replace

    from fastgen.analysis.serving import server_from

    server = server_from(fleet_record(tmp_path / "fleet", "cache_aware", 16448, 16448))
    options = analysis_options(server=server)
    assert (options.replicas, options.router, options.capacity_tokens) == (2, "cache_aware", 16448)
    given = analysis_options(server=server, replicas=4, router="round_robin")
    assert (given.replicas, given.router) == (4, "round_robin")
    odd = replace(server, router="power_of_two")
    with pytest.raises(SpecError, match="policy 'power_of_two', which analyze cannot model; give --router"):
        analysis_options(server=odd)
    assert analysis_options(server=odd, router="consistent_hash").router == "consistent_hash"
