"""analysis/calibrate.py: speeds fitted to a run with the queue the model predicts, not TTFT alone; its bad input."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from _support import ROOT
from conftest import run_fastgen

from fastgen.analysis import AnalysisOptions, config_targets
from fastgen.analysis.analyze import Corpus, predict
from fastgen.analysis.calibrate import Calibration, calibrate, calibrated_options, measured_speeds
from fastgen.analysis.rules import SchedulerSettings
from fastgen.analysis.schedule import ServiceModel
from fastgen.errors import SpecError
from fastgen.traces.blocks import load_reading

CONFIG = "scenario3/c100_noisy"  # twenty sessions 0.5 s apart: at these speeds their prefills queue
TRUTH = ServiceModel(prefill_tokens_per_s=3000.0, decode_tokens_per_s=40.0)
SETTINGS = SchedulerSettings(batch_tokens=2048, max_running=128)
SCHEDULER = {"max_num_batched_tokens": 2048, "max_num_seqs": 128, "enable_chunked_prefill": True, "policy": "fcfs"}


@pytest.fixture(scope="module")
def small(e2e_dataset) -> Path:
    return e2e_dataset


def _targets(small: Path):
    return config_targets(small / "configs", small / "traces")


def _options() -> AnalysisOptions:
    return AnalysisOptions(block_size=16, engine="vllm", settings=SETTINGS)


def write_run(folder: Path, small: Path, *, service: ServiceModel = TRUTH, fail: int = 0, config: str = CONFIG) -> Path:
    """A run folder as fastgen bakeoff writes one, of the model's own replay of CONFIG at `service`'s speeds: what
    a server that schedules as the model does would have recorded (start, TTFT, latency, usage, token times)."""
    from fastgen.formats.run_record import RunRecord
    from fastgen.formats.run_record import write_run as write_record

    target = next(t for t in _targets(small) if t.name == CONFIG)
    corpus = Corpus(target.trace_dir, load_reading(small / "traces" / "tokenizer"), 16)
    options = replace(_options(), service=service)
    entries = []
    for k, o in enumerate(predict(target, corpus, options.fleet())):
        request = corpus.request(o.file_index, o.event_id)
        output = max(1, request.output_tokens)
        step = (o.end_s - o.first_token_s) / max(1, output - 1)
        entries.append(
            {
                "start_time": 1000.0 + o.start_s,
                "end_time": 1000.0 + o.end_s,
                "error": {"error_type": "HTTP Error 500"} if k < fail else None,
                "info": {
                    "graph_event_id": o.event_id,
                    "response_metrics": {
                        "server_usage": {
                            "prompt_tokens": o.prompt_tokens,
                            "completion_tokens": output,
                            "prompt_tokens_details": {"cached_tokens": o.cached_tokens} if o.cached_tokens else None,
                        },
                        "output_token_times": [1000.0 + o.first_token_s + i * step for i in range(output)],
                    },
                },
                "computed_metrics": {
                    "time_to_first_token": o.first_token_s - o.start_s,
                    "request_latency": o.end_s - o.start_s,
                    "output_tokens": output,
                },
            }
        )
    folder.mkdir(parents=True)
    (folder / "per_request_lifecycle_metrics.json").write_text(json.dumps(entries))
    server = {"engine": "vllm", "version": "0.32.0", "kv_capacity_tokens": None, "block_size": 16}
    write_record(
        folder,
        RunRecord(
            config=config,
            repeat=1,
            status="completed",
            requests={"expected": len(entries), "recorded": len(entries), "failed": fail},
            identity={"server": {**server, "scheduler": SCHEDULER}},
        ),
    )
    return folder


def test_calibrate_recovers_the_speeds_of_a_queueing_run_where_ttft_alone_does_not(small, tmp_path):
    run = write_run(tmp_path / "label" / "scenario3" / "c100_noisy" / "repeat-1", small)
    reading = load_reading(small / "traces" / "tokenizer")
    calibration = calibrate(run, _targets(small), reading, _options())
    fitted = calibration.service
    assert fitted.prefill_tokens_per_s == pytest.approx(TRUTH.prefill_tokens_per_s, rel=0.1)
    # the decode step's shape comes from token times spread evenly over each request's decode (the synthetic run's):
    # its speed alone is near the truth, and the fitted model gives back the run's summed latency
    assert fitted.decode_tokens_per_s == pytest.approx(TRUTH.decode_tokens_per_s, rel=0.25)
    assert calibration.fit_error < 0.03
    # TTFT alone counts the queue as prefill: a much slower prefill than the server's
    entries = json.loads((run / "per_request_lifecycle_metrics.json").read_text())
    ttft_only, _, _ = measured_speeds(entries)
    assert ttft_only is not None and ttft_only < 0.6 * TRUTH.prefill_tokens_per_s
    # on the run's own send times the model gives every request the hit it reported
    assert calibration.hits_matched[0] == calibration.hits_matched[1] == len(entries)
    assert calibration.describe().startswith(f"calibrated from {run}: 1 runs, {len(entries)} requests of vllm 0.32.0")


def test_calibrate_from_several_runs_pools_them_and_keeps_each_ones_speeds_for_the_band(small, tmp_path):
    label = tmp_path / "label" / "scenario3" / "c100_noisy"
    write_run(label / "repeat-1", small)
    write_run(label / "repeat-2", small, service=replace(TRUTH, prefill_tokens_per_s=1500.0))
    calibration = calibrate(
        tmp_path / "label", _targets(small), load_reading(small / "traces" / "tokenizer"), _options()
    )
    alone = sorted(r.prefill_tokens_per_s for r in calibration.runs)
    assert len(alone) == 2 and alone[0] == pytest.approx(1500.0, rel=0.15) and alone[1] == pytest.approx(3000, rel=0.15)
    assert alone[0] < calibration.service.prefill_tokens_per_s < alone[1]
    assert calibration.run_configs == ("scenario3/c100_noisy", "scenario3/c100_noisy")


def test_a_sharded_run_calibrates_from_its_shards_records_merged(small, tmp_path):
    """A run of `bakeoff --shards 2` keeps each shard's reports in shards/shard-NN: calibration reads them as one
    run, the same as the run whose records they split, alone or found below a label folder."""
    reading = load_reading(small / "traces" / "tokenizer")
    whole = write_run(tmp_path / "whole" / "scenario3" / "c100_noisy" / "repeat-1", small)
    sharded = write_run(tmp_path / "sharded" / "scenario3" / "c100_noisy" / "repeat-1", small)
    records = sharded / "per_request_lifecycle_metrics.json"
    entries = json.loads(records.read_text())
    for k in range(2):
        shard = sharded / "shards" / f"shard-{k:02d}"
        shard.mkdir(parents=True)
        (shard / records.name).write_text(json.dumps(entries[k::2]))
    records.unlink()
    expected = calibrate(whole, _targets(small), reading, _options())
    for given in (sharded, tmp_path / "sharded"):
        calibration = calibrate(given, _targets(small), reading, _options())
        assert len(calibration.runs) == 1 and calibration.requests == expected.requests == len(entries)
        assert calibration.service == expected.service
        assert calibration.hits_matched == expected.hits_matched == (len(entries), len(entries))


def test_calibrated_options_take_the_fitted_speeds_and_a_given_speed_in_place_of_its_fitted_one():
    fitted, alone = ServiceModel(4000.0, 30.0), (ServiceModel(3000.0, 20.0), ServiceModel(5000.0, 40.0))
    calibration = Calibration(fitted, Path("runs"), 336, runs=alone, run_configs=("a/c1", "b/c2"), jitter_s=0.004)
    options, source = calibrated_options(_options(), calibration)
    assert (options.service, options.band_speeds) == (fitted, (("a/c1", alone[0]), ("b/c2", alone[1])))
    # the band of a config replays at its own runs' speeds, of one the runs did not run at every run's in turn
    assert {s for _, s in options.band_replays("b/c2")} == {alone[1]}
    assert {s for _, s in options.band_replays("c/c3")} == set(alone)
    assert (options.jitter.arrival_s, options.jitter.wake_s) == (0.004, 0.004)
    assert source is not None and source.startswith("calibrated from runs: 2 runs, 336 requests")
    # a speed given replaces the fitted one; the band then keeps the point's speeds alone
    options, source = calibrated_options(_options(), calibration, prefill_tokens_per_s=9000.0)
    assert (options.service.prefill_tokens_per_s, options.service.decode_tokens_per_s) == (9000.0, 30.0)
    assert options.band_speeds == () and source is not None and source.endswith("; prefill given")
    # no calibration: the defaults, or the speeds given, and no source line
    options, source = calibrated_options(_options(), None, decode_tokens_per_s=10.0)
    assert (options.service.decode_tokens_per_s, source) == (10.0, None)
    assert options.service.prefill_tokens_per_s == ServiceModel().prefill_tokens_per_s


@pytest.mark.parametrize("case", ["failed", "other config", "not a folder", "no records"])
def test_calibrate_refuses_bad_input_in_one_line_naming_it(small, tmp_path, case):
    run = tmp_path / "run"
    if case == "failed":
        write_run(run, small, fail=2)
    elif case == "other config":
        write_run(run, small, config="scenario9/c1")
    elif case == "no records":
        run.mkdir()
    with pytest.raises(SpecError) as error:
        calibrate(run, _targets(small), load_reading(small / "traces" / "tokenizer"), _options())
    message = str(error.value)
    assert str(run) in message and "\n" not in message
    expected = {
        "failed": "lost 2 of its requests",
        "other config": "scenario9/c1, which is not a config of the dataset analyzed",
        "not a folder": "is not a folder",
        "no records": "holds no per_request_lifecycle_metrics.json",
    }[case]
    assert expected in message


def test_analyze_calibrate_and_server_from_predict_for_that_server(small, tmp_path):
    run = write_run(tmp_path / "label" / "scenario3" / "c100_noisy" / "repeat-1", small)
    out = tmp_path / "analysis.json"
    result = run_fastgen(
        "analyze",
        str(small / "traces"),
        "--only",
        CONFIG,
        "--server-from",
        str(run),
        "--calibrate",
        str(run),
        "--kv-cache-tokens",
        "16448",
        "--band",
        "2",
        "--json",
        str(out),
        cwd=ROOT,
    )
    assert result.returncode == 0, result.stderr
    # the server as predicted: what its run recorded, and the flags given in its place (the capacity here)
    assert (
        f"server from {run}: vllm 0.32.0, KV capacity 16,448 tokens, block size 16; max_num_batched_tokens 2,048"
        in (result.stdout)
    )
    assert f"(calibrated from {run}: 1 runs" in result.stdout
    doc = json.loads(out.read_text())
    assert doc["scheduler"]["batch_tokens"] == 2048 and doc["capacity_tokens"] == 16448
    assert doc["service_model"]["prefill_tokens_per_s"] == pytest.approx(3000.0, rel=0.1)
    low, high = doc["configs"][0]["hit_percent_capacity_band"]
    assert low <= doc["configs"][0]["hit_percent_capacity"] <= high
