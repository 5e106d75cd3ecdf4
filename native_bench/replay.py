"""`python -m native_bench.replay`: how fast inference-perf starts replaying scenario 3's biggest configs, and how
much memory it takes, from the trace directory and from the dataset file, side by side in one run.

For each scale (default 1 and 5 times the sessions), fastgen writes scenario 3 alone (built-in tokenizer), then the
largest stable and noisy configs are replayed by the real inference-perf against the fake engine (e2e/engines/server.py,
in this process, on loopback), each source in turn:

- `traces`: the config rewritten to `trace_directory` (what `fastgen --source traces` writes): inference-perf
  parses every file of the directory in its parent process before the first request.
- `dataset cold`: the config as fastgen writes it (`hf_dataset_path`), with an empty `datasets` cache: the first
  run on a machine, which converts the JSON lines into the cache's Arrow file.
- `dataset warm`: the same again with that cache kept, as every later run (the bakeoff keeps it in its run folder).

Each replay runs `--sessions` sessions at `--rate` per second (the whole file is still what inference-perf loads),
and is stopped `--hold` seconds after the fake engine received its first request. Measured: seconds from starting
inference-perf to that first request, and the peak PSS of inference-perf's whole process tree (parent and forked
workers, sampled every 0.2 s: memory.py) until it stopped. A replay whose PSS passes `--cap-gib` is stopped there
and reported as over the cap, so the machine keeps its memory.
"""

from __future__ import annotations

import argparse
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import yaml

from .launch import REPO, BenchError, clean_slate, scratch_root
from .memory import PssSampler
from .report import environment, write_json

__all__ = ["main"]

GOAL_FIRST_REQUEST_S = 10.0
GOAL_PEAK_MIB = 1024
_VARIANTS = ("traces", "dataset cold", "dataset warm")
_NO_REQUEST_S = 900  # a replay that has sent nothing by then is reported as stuck


def _scenario3_workload(path: Path) -> Path:
    """The default workload with scenario 3 alone: the replay bench needs no other trace directory."""
    shown = subprocess.run(
        [sys.executable, "-m", "fastgen", "workload", "show"], capture_output=True, text=True, check=True, cwd=REPO
    ).stdout
    workload = yaml.safe_load(shown)
    workload["scenarios"] = {"scenario3": workload["scenarios"]["scenario3"]}
    path.write_text(yaml.safe_dump(workload, sort_keys=False))
    return path


def _generate(out: Path, scale: float, workload: Path, log) -> Path:
    t = time.perf_counter()
    command = [sys.executable, "-m", "fastgen", "--tokenizer", "builtin", "--workload", str(workload)]
    command += ["--scale", str(scale), "--output-dir", str(out / "traces"), "--config-dir", str(out / "configs")]
    done = subprocess.run([*command, "--quiet"], capture_output=True, text=True, cwd=REPO)
    if done.returncode != 0:
        raise BenchError(f"fastgen at --scale {scale} exited {done.returncode}: {done.stderr.strip()[-400:]}")
    log(f"x{scale:g}: scenario 3 generated in {time.perf_counter() - t:.0f} s")
    return out / "configs" / "scenario3"


def _largest(configs: Path, layout: str) -> Path:
    """The config of `layout` with the most sessions (c500 at the default scale)."""
    found = sorted(configs.glob(f"c*_{layout}.yml"), key=lambda p: int(p.stem[1:].split("_")[0]))
    if not found:
        raise BenchError(f"no scenario3 {layout} config in {configs}")
    return found[-1]


def _trial_config(config: Path, variant: str, base_url: str, sessions: int, *, rate: float, reports: Path) -> Path:
    """The config with a short stage, the fake engine's URL and (for `traces`) the trace directory as its source."""
    from fastgen.formats.rows import reading_trace_directory

    document = yaml.safe_load(config.read_text())
    if variant == "traces":
        document = reading_trace_directory(document)
    document["server"]["base_url"] = base_url
    # inference-perf refuses a rate above the concurrency cap
    cap = max(sessions, math.ceil(rate))
    document["load"]["stages"] = [{"concurrent_sessions": cap, "num_sessions": sessions, "session_rate": rate}]
    document["storage"] = {"local_storage": {"path": str(reports / variant.replace(" ", "-"))}}
    target = config.with_name(f"{config.stem}_bench_{variant.replace(' ', '_')}.yml")
    target.write_text(yaml.safe_dump(document, sort_keys=False))
    return target


def _stop(proc: subprocess.Popen) -> None:
    """SIGINT to the whole group (inference-perf's own Ctrl-C path), then SIGKILL if it lingers."""
    for sig, grace in ((signal.SIGINT, 10.0), (signal.SIGKILL, 30.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=grace)
            return
        except subprocess.TimeoutExpired:
            pass


def _replay(config: Path, server, cache: Path, log_path: Path, *, hold: float, cap_kib: int) -> dict:
    """Start inference-perf on `config`; stop it `hold` s after the server's first request (or at the PSS cap)."""
    from fastgen.bakeoff.inference_perf import inference_perf_command, inference_perf_env

    env = inference_perf_env(cache)
    server.reset()
    with open(log_path, "wb") as out:
        started = time.time()
        proc = subprocess.Popen(
            [*inference_perf_command(), "--config_file", str(config)],
            cwd=config.parent,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
        first, stopped_by = None, "exit"
        with PssSampler(proc.pid, cap_kib=cap_kib) as sampler:
            try:
                while proc.poll() is None:
                    now = time.time()
                    if first is None and server.records:
                        first = server.records[0]["t"] - started
                    if sampler.capped:
                        stopped_by = "cap"
                    elif first is not None and now - started > first + hold:
                        stopped_by = "hold"
                    elif first is None and now - started > _NO_REQUEST_S:
                        stopped_by = "stuck"
                    else:
                        time.sleep(0.05)
                        continue
                    break
            finally:
                _stop(proc)  # what ended the loop, Ctrl-C included
        if first is None and server.records:
            first = server.records[0]["t"] - started
    return {
        "first_request_s": first,
        "peak_pss_mib": sampler.peak_kib / 1024,
        "requests": len(server.records),
        "stopped_by": stopped_by,
        "rc": proc.returncode,
    }


def run(args: argparse.Namespace, log) -> list[dict]:
    from e2e.suites.run import free_port
    from e2e.engines.server import ServerThread

    rows: list[dict] = []
    with scratch_root(args.scratch) as root:
        workload = _scenario3_workload(root / "scenario3.yaml")
        for scale in args.scales:
            data = root / f"x{scale:g}"
            configs = _generate(data, scale, workload, log)
            with ServerThread(data / "traces" / "tokenizer", port=free_port()) as server:
                for layout in ("stable", "noisy"):
                    config = _largest(configs, layout)
                    cache = data / f"datasets-cache-{layout}"
                    for variant in _VARIANTS:
                        clean_slate(settle=args.settle)
                        trial = _trial_config(
                            config, variant, server.base_url, args.sessions, rate=args.rate, reports=data
                        )
                        log_path = data / f"{trial.stem}.log"
                        measured = _replay(
                            trial, server, cache, log_path, hold=args.hold, cap_kib=int(args.cap_gib * 2**20)
                        )
                        row = {"scale": scale, "config": f"scenario3/{config.stem}", "source": variant, **measured}
                        row["sessions_in_file"] = len(list((data / "traces" / f"scenario3_{layout}").glob("*.json")))
                        row["log_tail"] = log_path.read_text(errors="replace").splitlines()[-3:]
                        rows.append(row)
                        log(_describe(row))
            clean_slate(data)  # the next scale's dataset needs the disk
    return rows


def _describe(row: dict) -> str:
    first = "no request" if row["first_request_s"] is None else f"first request {row['first_request_s']:.1f} s"
    capped = " (stopped at the PSS cap)" if row["stopped_by"] == "cap" else ""
    if row["first_request_s"] is None and not capped:
        capped = f" (inference-perf exited {row['rc']}: {' | '.join(row['log_tail'])[-300:]})"
    return (
        f"x{row['scale']:g} {row['config']} {row['source']}: {first}, peak PSS {row['peak_pss_mib']:,.0f} MiB, "
        f"{row['requests']} requests{capped}"
    )


def table(rows: list[dict], cap_gib: float) -> str:
    lines = [
        "| scale | config | sessions in the file | source | first request s | peak PSS MiB | goal |",
        "|---|---|---:|---|---:|---:|---|",
    ]
    for r in rows:
        first = "-" if r["first_request_s"] is None else f"{r['first_request_s']:.1f}"
        peak = f"> {cap_gib * 1024:,.0f} (stopped)" if r["stopped_by"] == "cap" else f"{r['peak_pss_mib']:,.0f}"
        met = (
            r["first_request_s"] is not None
            and r["first_request_s"] <= GOAL_FIRST_REQUEST_S
            and r["peak_pss_mib"] <= GOAL_PEAK_MIB
            and r["stopped_by"] != "cap"
        )
        lines.append(
            f"| x{r['scale']:g} | {r['config']} | {r['sessions_in_file']:,} | {r['source']} | {first} | {peak} | "
            f"{'met' if met else 'missed'} |"
        )
    return "\n".join(lines)


def _scales(text: str) -> tuple[float, ...]:
    try:
        values = tuple(float(v) for v in text.split(",") if v.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"--scales takes numbers separated by commas, got {text!r}") from None
    if not values or any(not 0 < v <= 100 for v in values):
        raise argparse.ArgumentTypeError(f"--scales values must be > 0 and <= 100, got {text!r}")
    return values


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="native_bench.replay", description=__doc__.split("\n\n")[0])
    p.add_argument("--scales", type=_scales, default=(1.0, 5.0), help="session scales to run (default 1,5)")
    p.add_argument("--sessions", type=int, default=20, help="sessions each replay starts (default 20)")
    p.add_argument("--rate", type=float, default=5.0, help="sessions per second (default 5)")
    p.add_argument("--hold", type=float, default=10.0, help="seconds replayed after the first request (default 10)")
    p.add_argument("--cap-gib", type=float, default=16.0, help="stop a replay whose PSS passes this (default 16)")
    p.add_argument("--settle", type=float, default=5.0, help="seconds waited after a sync before each replay")
    p.add_argument("--scratch", type=Path, help="where datasets go (default REPO/.bench-scratch; removed after)")
    p.add_argument("--json", type=Path, default=REPO / "native_bench" / "replay.json", help="results file")
    return p


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.sessions < 1 or args.rate <= 0 or args.hold < 0 or args.cap_gib <= 0:
        _parser().error("--sessions must be >= 1, --rate and --cap-gib > 0, --hold >= 0")
    try:
        rows = run(args, log=lambda msg: print(f"native_bench.replay: {msg}", file=sys.stderr, flush=True))
    except BenchError as exc:
        print(f"native_bench.replay: error: {exc}", file=sys.stderr)
        return 1
    print(table(rows, args.cap_gib))
    arguments = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()}
    write_json(
        args.json, {"bench": "native_bench.replay", "arguments": arguments, "environment": environment(), "rows": rows}
    )
    print(f"results: {args.json}")
    failed = [r for r in rows if r["first_request_s"] is None and r["stopped_by"] != "cap"]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
