"""fastgen.generator.configs against the real inference-perf 0.7.0 config loader (no mocks)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml
from inference_perf.config import read_config

from fastgen.generator.configs import config_layout, render_configs, write_configs
from fastgen.errors import OutputError, SpecError
from fastgen.generator.scenarios import default_spec
from fastgen.formats.config_dialect import REPORT_LABELS
from fastgen.generator.spec import Spec

DEFAULT = default_spec()
SCALED = default_spec().scaled(sessions=0.03, budgets=0.05)
TRACE_DIRS = ("scenario1", "scenario2_sync", "scenario2_stagger", "scenario3_stable", "scenario3_noisy")


def expected_stages(spec: Spec) -> dict[str, tuple[int, int, float | None, int]]:
    """path -> (concurrent_sessions, num_sessions, session_rate, corpus size), written out from the design."""
    s1, s2, s3 = spec.scenario1, spec.scenario2, spec.scenario3
    out = {f"scenario1/c{c}.yml": (c, s1.sessions, None, s1.sessions) for c in s1.concurrency}
    for c in s2.concurrency:
        for timing in ("sync", "stagger"):
            out[f"scenario2/c{c}_{timing}.yml"] = (c, min(c, s2.sets), None, s2.sets)
    for c in s3.concurrency:
        for layout in ("stable", "noisy"):
            n = min(c, s3.sessions)
            out[f"scenario3/c{c}_{layout}.yml"] = (c, n, n / s3.arrival_window_s, s3.sessions)
    return out


@pytest.fixture
def roots(tmp_path: Path) -> dict[str, Path]:
    roots = {"trace_root": tmp_path / "traces", "config_root": tmp_path / "configs", "tokenizer_dir": tmp_path / "tok"}
    for name in TRACE_DIRS:
        (roots["trace_root"] / name).mkdir(parents=True)
    roots["tokenizer_dir"].mkdir()
    return roots


def render(roots: dict[str, Path], spec: Spec = DEFAULT, **overrides) -> dict[str, str]:
    kwargs = dict(spec=spec, model="Qwen/Qwen3-32B", server_type="vllm", base_seed=42, **roots)
    kwargs.update(overrides)
    return render_configs(**kwargs)


def load_all(roots: dict[str, Path], rendered: dict[str, str]) -> dict[str, tuple[Path, object]]:
    paths = write_configs(roots["config_root"], rendered)
    return {p.relative_to(roots["config_root"]).as_posix(): (p, read_config(str(p))) for p in paths}


def test_config_layout_default_spec_names_the_17_design_files():
    names = [entry.path for entry in config_layout(DEFAULT)]
    assert sorted(names) == sorted(
        [f"scenario1/c{c}.yml" for c in (1, 10, 25, 50, 100)]
        + [f"scenario2/c{c}_{t}.yml" for c in (10, 25, 50) for t in ("sync", "stagger")]
        + [f"scenario3/c{c}_{t}.yml" for c in (100, 250, 500) for t in ("stable", "noisy")]
    )


@pytest.mark.parametrize("spec", [DEFAULT, SCALED], ids=["default", "scaled"])
def test_render_configs_every_file_loads_with_inference_perf_and_matches_the_spec(roots, spec):
    loaded = load_all(roots, render(roots, spec))
    expected = expected_stages(spec)
    assert set(loaded) == set(expected)
    for name, (_path, config) in loaded.items():
        concurrent, sessions, rate, corpus = expected[name]
        assert config.api.streaming is True and config.api.type.value == "chat"
        assert config.server.type.value == "vllm" and config.server.model_name == "Qwen/Qwen3-32B"
        assert config.load.type.value == "trace_session_replay" and config.load.base_seed == 42
        assert config.tokenizer.pretrained_model_name_or_path
        # no Prometheus unless one is named: no 17 s wait and 141 failed queries after every run
        assert config.metrics.type.value == "default" and config.metrics.prometheus is None
        # every span carries tools, so inference-perf sends ignore_eos false whatever the file says: it says so
        assert config.server.ignore_eos is False
        assert config.report.session_lifecycle.per_session is True
        # per-request records, with info and computed metrics but no raw bodies: what `fastgen compare` reads
        lifecycle = config.report.request_lifecycle
        assert lifecycle.per_request is True
        fields = lifecycle.per_request_fields
        assert (fields.info, fields.computed_metrics, fields.request, fields.response) == (True, True, False, False)
        assert config.data.otel_trace_replay.attribute_to_label_map == REPORT_LABELS
        (stage,) = config.load.stages
        assert (stage.concurrent_sessions, stage.num_sessions) == (concurrent, sessions)
        # inference-perf refuses a run whose num_sessions add up to more than the corpus holds
        assert stage.num_sessions <= corpus
        assert stage.session_rate == (pytest.approx(rate) if rate is not None else None)
        if stage.session_rate is not None:
            assert stage.session_rate <= stage.concurrent_sessions
        # every queued event of every active session must be able to hold a slot on the worker it is pinned to
        events = spec.scenario3.turns.hi if name.startswith("scenario3") else 6
        assert config.load.worker_max_concurrency >= concurrent * events


def test_render_configs_scaled_spec_caps_num_sessions_at_the_corpus(roots):
    loaded = load_all(roots, render(roots, SCALED))
    capped = set()
    for name, (_, config) in loaded.items():
        (stage,) = config.load.stages
        corpus = expected_stages(SCALED)[name][3]
        assert stage.num_sessions <= corpus
        if stage.num_sessions == corpus < stage.concurrent_sessions:
            capped.add(name.split("/")[0])
    # the scaled corpus is smaller than the design's levels in every scenario, so each one exercises the cap
    assert capped == {"scenario1", "scenario2", "scenario3"}


def test_render_configs_relative_paths_resolve_from_the_config_folder(roots):
    for name, (path, config) in load_all(roots, render(roots)).items():
        entry = next(e for e in config_layout(DEFAULT) if e.path == name)
        data_files = config.data.otel_trace_replay.hf_dataset_path["data_files"]
        tokenizer = config.tokenizer.pretrained_model_name_or_path
        assert not os.path.isabs(data_files) and not os.path.isabs(tokenizer)
        assert (path.parent / data_files).resolve() == (roots["trace_root"] / f"{entry.trace_dir}.jsonl").resolve()
        assert (path.parent / tokenizer).resolve() == roots["tokenizer_dir"].resolve()
        # reports/<label>/<scenario>/<config>: the label (default: the server type) keeps two servers' runs apart
        report = (path.parent / config.storage.local_storage.path).resolve()
        assert report == (roots["config_root"].parent / "reports" / "vllm" / entry.scenario / entry.name).resolve()


def test_render_configs_relative_paths_are_machine_independent(roots, tmp_path):
    elsewhere = {key: tmp_path / "elsewhere" / path.relative_to(tmp_path) for key, path in roots.items()}
    assert render(roots) == render(elsewhere)


def test_render_configs_absolute_paths_true_writes_absolute_paths(roots):
    for _name, (_, config) in load_all(roots, render(roots, absolute_paths=True, source="traces")).items():
        trace_directory = Path(config.data.otel_trace_replay.trace_directory)
        assert trace_directory.is_absolute() and trace_directory.is_dir()
        assert Path(config.tokenizer.pretrained_model_name_or_path) == roots["tokenizer_dir"].resolve()
        assert Path(config.storage.local_storage.path).is_absolute()


def test_render_configs_sglang_server_type_appears_as_server_type(roots):
    loaded = load_all(roots, render(roots, server_type="sglang", base_url="http://gpu:30000"))
    assert {config.server.type.value for _, config in loaded.values()} == {"sglang"}
    assert {config.server.base_url for _, config in loaded.values()} == {"http://gpu:30000"}


@pytest.mark.parametrize("bad", ["tgi", "mock", "VLLM", ""])
def test_render_configs_bad_server_type_raises_spec_error(roots, bad):
    with pytest.raises(SpecError, match=r"vllm, sglang") as info:
        render(roots, server_type=bad)
    assert repr(bad) in str(info.value) and "\n" not in str(info.value)


def test_render_configs_metrics_prometheus_writes_the_base_url(roots):
    loaded = load_all(roots, render(roots, metrics="prometheus", prometheus_url="http://prom:9090"))
    assert {config.metrics.type.value for _, config in loaded.values()} == {"prometheus"}
    # pydantic's HttpUrl normalises the base URL with a trailing slash; the client strips it again.
    assert {str(config.metrics.prometheus.url).rstrip("/") for _, config in loaded.values()} == {"http://prom:9090"}


def test_render_configs_scenario3_header_says_arrivals_and_sessions_in_flight(roots):
    text = render(roots)["scenario3/c500_stable.yml"]
    note = text.splitlines()[2]
    rate = 500 / DEFAULT.scenario3.arrival_window_s
    # the name counts arrivals over the window; in flight is rate x session length, far fewer than 500
    assert note.startswith(
        f"# c500: 500 sessions arriving evenly over {DEFAULT.scenario3.arrival_window_s} s "
        f"({rate:.3g}/s); concurrent_sessions 500 is a cap, not the load"
    ), note
    timing, turns = DEFAULT.timing.tool_exec_ms, DEFAULT.scenario3.turns
    floor = rate * ((turns.lo + turns.hi) / 2 - 1) * (timing.lo + timing.hi) / 2 / 1000
    assert f"at least {floor:.1f}" in note and f"{rate * 36:.0f} for sessions of 36 s" in note, note


def test_render_configs_max_wait_ms_reaches_the_replay_config_only_when_given(roots):
    capped = load_all(roots, render(roots, max_wait_ms=250))
    assert {config.data.otel_trace_replay.max_wait_ms for _, config in capped.values()} == {250}
    assert all("max_wait_ms" not in text for text in render(roots).values())


def test_render_configs_bad_metrics_type_raises_spec_error(roots):
    with pytest.raises(SpecError, match=r"prometheus, default"):
        render(roots, metrics="grafana")


def test_render_configs_twice_gives_identical_text(roots):
    first, second = render(roots), render(roots)
    assert first == second
    for name, text in first.items():
        scenario, file = name.split("/")
        # the header says how to run the file and where its reports go, true wherever the folders are, and carries
        # nothing (date, host) that would change between runs
        lines = text.splitlines()
        assert lines[0] == (
            "# generated by fastgen; paths are relative to this file's folder: cd there, then "
            f"inference-perf --config_file {file}"
        )
        stem = file.removesuffix(".yml")
        assert lines[1] == (
            f"# reports go to ../../reports/vllm/{scenario}/{stem} from there (a reports "
            "folder beside the config folder)"
        )


def test_render_configs_label_names_the_report_folder(roots):
    rendered = render_configs(spec=DEFAULT, model="m", base_seed=1, label="sglang-h100", server_type="sglang", **roots)
    for name, text in rendered.items():
        path = yaml.safe_load(text)["storage"]["local_storage"]["path"]
        assert path == f"../../reports/sglang-h100/{name.removesuffix('.yml')}"


@pytest.mark.parametrize("label", ["a/b", "..", ".hidden", "two words"])
def test_render_configs_label_that_is_not_a_folder_name_raises_spec_error(roots, label):
    with pytest.raises(SpecError, match="is not a folder name"):
        render_configs(spec=DEFAULT, model="m", base_seed=1, label=label, **roots)


def test_write_configs_rewrite_gives_identical_bytes_and_no_temp_files(roots):
    rendered = render(roots)
    before = {p: p.read_bytes() for p in write_configs(roots["config_root"], rendered)}
    after = {p: p.read_bytes() for p in write_configs(roots["config_root"], rendered)}
    assert before == after and len(after) == 17
    assert sorted(p for p in roots["config_root"].rglob("*") if p.is_file()) == sorted(after)


def test_write_configs_path_outside_the_root_raises_output_error(roots):
    with pytest.raises(OutputError, match="leaves the config folder"):
        write_configs(roots["config_root"], {"../escape.yml": "x: 1\n"})


@pytest.mark.parametrize(
    "outputs, tool_tokens, substitution_off, override",
    [("live", "floor", False, True), ("recorded", "recorded", True, False), ("recorded", "floor", True, True)],
)
def test_render_configs_outputs_and_tool_call_modes_reach_inference_perf(
    roots, outputs, tool_tokens, substitution_off, override
):
    rendered = render(roots, outputs=outputs, tool_call_max_tokens=tool_tokens)
    for path, config in load_all(roots, rendered).values():
        replay = config.data.otel_trace_replay
        assert (replay.disable_output_substitution, replay.override_tool_call_max_tokens) == (
            substitution_off,
            override,
        ), path
        assert f"(fastgen --outputs {outputs})" in path.read_text()


@pytest.mark.parametrize("tool_choice, sent", [("forced", "force_recorded"), ("as_recorded", "as_recorded")])
def test_render_configs_tool_choice_mode_reaches_inference_perf_and_the_header_says_it(roots, tool_choice, sent):
    rendered = render(roots, tool_choice=tool_choice)
    for path, config in load_all(roots, rendered).values():
        assert config.data.otel_trace_replay.tool_choice_mode.value == sent, path
        assert f"(fastgen --tool-choice {tool_choice})" in path.read_text()


@pytest.mark.parametrize("bad", [{"outputs": "replayed"}, {"tool_call_max_tokens": "4096"}, {"tool_choice": "auto"}])
def test_render_configs_unknown_replay_mode_raises_spec_error(roots, bad):
    with pytest.raises(SpecError, match="is not known; use one of"):
        render(roots, **bad)
