"""analysis/capacity_predict.py and `fastgen analyze --capacity`: the capacity under an SLO, predicted by the engine
model on the e2e suite's small dataset (20 scenario-3 sessions: loads 1 to 10 in flight)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from conftest import run_fastgen
from fastgen.analysis import AnalysisOptions, config_targets
from fastgen.analysis.capacity_predict import figures_at, predict_capacity
from fastgen.analysis.corpus import Corpus
from fastgen.analysis.schedule import ServiceModel
from fastgen.bakeoff.capacity_search import SLO, Outcome
from fastgen.traces.blocks import load_reading

CONFIG = "scenario3/c100_noisy"
# a slow server's prefill: the replay's queue then grows with the sessions in flight (at a GPU's 20,000 tokens/s
# these small prompts barely queue at all)
SLOW = ServiceModel(prefill_tokens_per_s=2000)


@pytest.fixture(scope="module")
def replay(e2e_dataset):
    """(the config's target, its corpus) of the e2e dataset."""
    target = next(t for t in config_targets(e2e_dataset / "configs", e2e_dataset / "traces") if t.name == CONFIG)
    reading = load_reading(e2e_dataset / "traces" / "tokenizer", "auto")
    return target, Corpus(target.trace_dir, reading, 16)


def test_predicted_ttft_p95_grows_with_the_sessions_in_flight(replay):
    target, corpus = replay
    options = AnalysisOptions(service=SLOW, band=0)
    ttft = [figures_at(target, corpus, options, n).ttft_p95_ms for n in (1, 4, 10)]
    assert None not in ttft
    assert ttft[0] < ttft[1] < ttft[2], ttft
    # every answer counts: the figures are over all the replay's requests, whatever the load
    assert figures_at(target, corpus, options, 1).requests == figures_at(target, corpus, options, 10).requests


def test_the_bracket_holds_the_load_where_the_simulated_p95_crosses_the_slo(replay):
    target, corpus = replay
    options = AnalysisOptions(service=SLOW, band=2)
    low, high = (figures_at(target, corpus, options, n).ttft_p95_ms for n in (1, 10))
    assert low is not None and high is not None
    slo = SLO(ttft_p95_ms=(low + high) / 2)  # met at one in flight, broken at ten: the crossing lies between
    found = predict_capacity(target, corpus, options, slo, width=0.10)
    capacity = found.capacity
    assert capacity.outcome is Outcome.BRACKETED
    assert capacity.lo is not None and capacity.hi is not None
    assert capacity.hi / capacity.lo - 1 <= 0.10 or capacity.hi - capacity.lo <= 1
    # simulated again directly: lo meets, hi breaks
    assert figures_at(target, corpus, options, int(capacity.lo)).ttft_p95_ms <= slo.ttft_p95_ms
    assert figures_at(target, corpus, options, int(capacity.hi)).ttft_p95_ms > slo.ttft_p95_ms
    assert found.hit_percent() == figures_at(target, corpus, options, int(capacity.lo)).hit_percent
    # the band spans the unjittered bracket and each jittered replay's
    band = found.band_range()
    assert band is not None and len(found.band) == 2
    assert band[0] is not None and band[0] <= capacity.lo
    assert band[1] is not None and band[1] >= capacity.hi
    unjittered = predict_capacity(target, corpus, dataclasses.replace(options, band=0), slo)
    assert unjittered.capacity == capacity and unjittered.band_range() is None


def _analyze(e2e_dataset: Path, *flags: str):
    return run_fastgen(
        "analyze", str(e2e_dataset / "traces"), "--only", CONFIG, "--workers", "1", "--band", "0", *flags
    )


def test_an_slo_every_load_meets_and_one_none_meets_say_so_in_one_line(e2e_dataset, tmp_path):
    out = tmp_path / "capacity.json"
    every = _analyze(e2e_dataset, "--capacity", "--slo", "ttft_p95_ms=1000000", "--json", str(out))
    assert every.returncode == 1, every.stderr
    lines = every.stdout.splitlines()
    assert lines[0].startswith("service model: prefill 20,000 tokens/s, decode 50.0 tokens/s (the defaults)")
    assert len(lines) == 2 and lines[1].startswith(f"{CONFIG}: predicted every load meets ttft_p95_ms=1e+06")
    assert "no band (--band 0)" in lines[1]
    document = json.loads(out.read_text())
    assert document["service"]["prefill_tokens_per_s"] == 20000 and document["service"]["source"] == "the defaults"
    [config] = document["configs"]
    assert config["outcome"] == "above the highest load" and config["lo"] == 10 and config["hi"] is None
    assert config["loads"][-1]["sessions"] == 10 and config["hit_percent"] == config["loads"][-1]["hit_percent"]

    none = _analyze(e2e_dataset, "--capacity", "--slo", "ttft_p95_ms=1")
    assert none.returncode == 1, none.stderr
    assert f"{CONFIG}: predicted no load meets ttft_p95_ms=1: the lowest allowed, 1, already breaks it" in none.stdout


def test_a_bracketed_prediction_exits_zero(e2e_dataset):
    result = _analyze(
        e2e_dataset, "--capacity", "--slo", "ttft_p95_ms=2300", "--prefill-tokens-per-s", "2000", "--width", "0.2"
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "prefill 2,000 tokens/s" in result.stdout and "(given)" in result.stdout
    assert f"{CONFIG}: predicted capacity under ttft_p95_ms=2300: between " in result.stdout


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--slo", "ttft_p95_ms=2000"], "--slo is for a capacity prediction; add --capacity"),
        (["--capacity"], "--capacity needs the SLO to meet: add --slo ttft_p95_ms=MS"),
        (["--capacity", "--slo", "ttft=5"], "--slo: 'ttft=5' is not NAME=VALUE"),
        (["--capacity", "--slo", "ttft_p95_ms=5", "--sweep"], "drop --sweep"),
    ],
)
def test_bad_capacity_flags_give_one_line(e2e_dataset, flags, message):
    result = _analyze(e2e_dataset, *flags)
    assert result.returncode != 0
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and message in lines[0], result.stderr
    assert result.stdout == ""
