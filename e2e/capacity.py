"""analyze's prediction at capacity against both real engines: a KV cache too small for scenario 3's noisy layout.

    python -m e2e.capacity [--workdir .e2e-capacity] [--repeat 3] [--vllm-venv DIR] [--sglang-venv DIR]

A measurement, not a CI step (about 15 minutes on 2 cores): the e2e dataset's scenario3/c100_noisy (twenty sessions
arriving over 10 s, a few K tokens a prompt) against a real vLLM with SMALL_BLOCKS blocks of 32 tokens and a real
SGLang with --max-total-tokens of as many tokens (page size 1), one engine at a time, each run `--repeat` times with
the recorded outputs, recorded tool-call budgets and no tool_choice sent (`--tool-choice as_recorded`: both engines
render every tool, so both prefill the prompts analyze rebuilds). For each engine it prints, per repeat, the hit
ratio of the engine's own counters over the run, against `fastgen analyze --engine ENGINE` at the capacity the
bakeoff recorded from the server: with the default service model, and calibrated from the engine's own runs
(`--calibrate`). It fails when a repeat is further from the default prediction than its engine's TOLERANCE_POINTS,
the largest gap measured (docs/analyze.md has the figures) rounded up: a guard against a change that moves either
the model or the engines, not a claim that the model is that close on a GPU.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path
from typing import Optional

from fastgen.results import read_runs

from . import sglang, vllm
from .bakeoff import fastgen_command
from .bakeoff_sglang import run_bakeoff, sglang_hit_percent, start_sglang
from .bakeoff_vllm import MAX_MODEL_LEN, SMALL_BLOCKS, _recorded_capacity, _vllm_hit_percent
from .engine_process import DEFAULT_MODEL, TOKENIZER, build_model
from .run import Dataset, generate

__all__ = ["main", "measure"]

CONFIG = "scenario3/c100_noisy"
SMALL_TOKENS = SMALL_BLOCKS * 32  # vLLM's blocks as tokens; SGLang gets the same pool
MODES = ("--outputs", "recorded", "--tool-call-max-tokens", "recorded", "--tool-choice", "as_recorded")
# Measured 2026-12-03 (three repeats each, a busy 2-core machine): vLLM 44.13, 38.78, 43.36 % against 47.4 predicted
# (45.4 calibrated); SGLang 39.92, 39.92, 39.92 % against 52.8 (56.4 calibrated). Both below the prediction: the
# model admits every request at once and leaves out what the engines keep back (SGLang reserves room for running
# requests' decode; its 39.9 % is the prediction at about 12,000 of its 16,448 tokens).
TOLERANCE_POINTS = {"vllm": 10.0, "sglang": 14.0}
BLOCK_SIZE = {"vllm": "32", "sglang": "1"}  # vLLM's CPU build; SGLang's default page size


def _predicted(workdir: Path, engine: str, capacity: int, *extra: str) -> Optional[float]:
    out = workdir / f"analysis-{engine}{'-calibrated' if extra else ''}.json"
    result = fastgen_command(
        "analyze",
        str(workdir / "traces"),
        "--configs",
        str(workdir / "configs"),
        "--only",
        CONFIG,
        "--engine",
        engine,
        "--block-size",
        BLOCK_SIZE[engine],
        "--kv-cache-tokens",
        str(capacity),
        "--json",
        str(out),
        *extra,
    )
    if result.returncode != 0:
        print(f"analyze --engine {engine} {' '.join(extra)} exited {result.returncode}: {result.stderr[-600:]}")
        return None
    doc = json.loads(out.read_text())
    print(f"{engine}: analyze {' '.join(extra) or '(default service model)'}: {doc['service_model']}", flush=True)
    return doc["configs"][0]["hit_percent_capacity"]


def _own(engine: str, folder: Path) -> Optional[float]:
    return (_vllm_hit_percent if engine == "vllm" else sglang_hit_percent)(folder / "metrics.jsonl")


def measure(workdir: Path, repeats: int, venvs: dict[str, Path]) -> tuple[list[str], dict]:
    workdir = Path(workdir).resolve()
    generate(workdir, "http://127.0.0.1:9", Dataset())
    failures: list[str] = []
    figures: dict = {}
    for engine in ("vllm", "sglang"):
        python = (vllm if engine == "vllm" else sglang).install(venvs[engine], quiet=True)
        model = build_model(python, TOKENIZER, venvs[engine] / f"fastgen-tiny-llama-{MAX_MODEL_LEN}", MAX_MODEL_LEN)
        server = (
            vllm.VllmServer(
                python,
                model,
                served_model_name=DEFAULT_MODEL,
                max_model_len=MAX_MODEL_LEN,
                kv_cache_gib=1,
                num_blocks=SMALL_BLOCKS,
                log=workdir / "logs" / "vllm.log",
            )
            if engine == "vllm"
            else start_sglang(python, model, workdir, engine, SMALL_TOKENS)
        )
        with server:
            print(f"{engine}: serving after {server.started_s:.0f} s", flush=True)
            ran = run_bakeoff(server.base_url, engine, workdir, repeats, MODES, configs=(CONFIG,))
        if ran:
            return failures + ran, figures
        label_dir = workdir / "reports" / engine
        capacity = _recorded_capacity(label_dir)
        if capacity is None:
            return failures + [f"{engine}: the runs recorded no single KV capacity"], figures
        predicted = _predicted(workdir, engine, capacity)
        calibrated = _predicted(workdir, engine, capacity, "--calibrate", str(label_dir))
        unbounded = json.loads((workdir / f"analysis-{engine}.json").read_text())["configs"][0]["hit_percent_infinite"]
        own = [_own(engine, repeat.folder) for repeat in read_runs(label_dir)[0][CONFIG].repeats]
        figures[engine] = {
            "capacity_tokens": capacity,
            "measured": own,
            "predicted": predicted,
            "calibrated": calibrated,
            "unbounded": unbounded,
        }
        shown = ", ".join("-" if o is None else f"{o:.2f}" for o in own)
        print(
            f"{engine} {CONFIG} at {capacity:,} tokens: measured {shown} % (the engine's counters, per repeat); "
            f"analyze {predicted:.2f} % (default service model), {calibrated:.2f} % (calibrated); "
            f"{unbounded:.2f} % unbounded",
            flush=True,
        )
        for index, value in enumerate(own, start=1):
            if value is None or predicted is None or abs(value - predicted) > TOLERANCE_POINTS[engine]:
                failures.append(
                    f"{engine} repeat {index}: measured {value} %, predicted {predicted} %: more than "
                    f"{TOLERANCE_POINTS[engine]} points apart"
                )
    return failures, figures


def main(argv: Optional[list[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="python -m e2e.capacity", description=__doc__.split("\n\n")[0])
    p.add_argument("--workdir", type=Path, default=Path(".e2e-capacity"))
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--vllm-venv", type=Path, default=Path(os.environ.get("FASTGEN_VLLM_VENV", ".e2e-vllm/venv")))
    p.add_argument("--sglang-venv", type=Path, default=Path(os.environ.get("FASTGEN_SGLANG_VENV", ".e2e-sglang/venv")))
    args = p.parse_args(argv)
    started = time.monotonic()
    failures, figures = measure(
        args.workdir, args.repeat, {"vllm": args.vllm_venv.resolve(), "sglang": args.sglang_venv.resolve()}
    )
    (Path(args.workdir) / "capacity.json").write_text(json.dumps(figures, indent=1) + "\n")
    for engine, f in figures.items():
        measured = [m for m in f["measured"] if m is not None]
        if measured:
            print(
                f"{engine}: median measured {statistics.median(measured):.2f} %, range "
                f"{min(measured):.2f}-{max(measured):.2f}; predicted {f['predicted']:.2f}, calibrated "
                f"{f['calibrated']:.2f}"
            )
    for failure in failures:
        print(f"FAILED: {failure}")
    print(f"capacity measurement: {len(failures)} failures, {time.monotonic() - started:.0f} s")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
