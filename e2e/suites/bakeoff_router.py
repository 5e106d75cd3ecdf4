"""`fastgen bakeoff` through a real router: vllm-router 0.1.17 (e2e/real/router.py) in front of two engines, once per
routing policy (round_robin, then cache_aware), then `fastgen compare` of the two policies.

    python -m e2e.suites.bakeoff_router [--engines vllm|fake] [--workdir .e2e-router] [--router-venv DIR] [--venv DIR]

The dataset is the fleet preset, small (`--workload fleet --scale 0.04 --budget-scale 0.02`): scenario 3's 20 sessions
(the test arm: a shared prefix, and turns that extend their session's prompt) and 20 one-request chains that share
nothing (the control arm), with the recorded outputs and no tool_choice sent (so no request but the replay's goes
through the router: the router's own counts are then the replay's). The engines: two real vLLM servers
(e2e/real/vllm.py, 1 GiB of KV cache each; `--engines vllm`, what `make e2e-router` runs), or two fake vLLM engines that
log every request (e2e/engines/fake_engine.py; `--engines fake`, what the test suite runs). A router is started per
policy and the bakeoff finds the replicas where it lists them (GET /workers); the policy is given (`--router-policy`).
The checks, per policy:

- every run completed, after a reset verified on each replica;
- each replica's figures in run.json (its counters' growth over the run) are those the report shows, and equal what
  the engine itself says: its /metrics read after the bakeoff equal the run's last sample of it (nothing ran since);
  with fake engines, every request in its own log between that run's reset and the next, token for token;
- the requests the router says it sent each replica (vllm_router_processed_requests_total, over the bakeoff) are
  the requests that replica counted;
- the replicas' prompt tokens, summed, are the prompt tokens the run's requests were answered with (the report's
  `counters = requests`);
- the control arm hits (almost) nothing under either policy. Which policy hits more on scenario 3 is printed, not
  checked: it is the router's behaviour, and it varied from run to run.
"""

from __future__ import annotations

import contextlib
import json
import time
from pathlib import Path
from typing import Optional

from fastgen.engine_endpoints import VLLM
from fastgen.formats.run_folder import METRICS_FILE, RUN_FILE
from fastgen.results import read_runs

from .bakeoff import FakeEngineProcess, segments
from ..real.router import RouterProcess, install
from .run import Dataset, generate
from .runner import add_venv, analyze_for, bakeoff, compare, exit_problem, run_suite, suite_parser

__all__ = ["CONFIGS", "POLICIES", "main", "run_router_bakeoff"]

POLICIES = ("round_robin", "cache_aware")
# in the bakeoff's order (scenario by scenario, by name): each engine's log holds them so, policy after policy
CONFIGS = ("chain/c16", "scenario3/c100_noisy")
CONTROL_ARM, TEST_ARM = CONFIGS
# the control arm's requests share only the chat template's first tokens: vLLM's 32-token blocks never hit them
CONTROL_HIT_PERCENT_AT_MOST = 1.0
MODES = ("--outputs", "recorded", "--tool-call-max-tokens", "recorded", "--tool-choice", "as_recorded")
MAX_MODEL_LEN = 16384  # as e2e.suites.bakeoff_vllm: the prompts (a few K tokens) and a tool call's max_tokens
FIGURES = ("requests", "prompt_tokens", "cached_tokens")


def dataset(workdir: Path) -> None:
    generate(workdir, "http://127.0.0.1:9", Dataset(workload="fleet"))


@contextlib.contextmanager
def fake_engines(workdir: Path):
    """Two fake vLLM engines that log every request; yields (their URLs, {URL: its log's path})."""
    with contextlib.ExitStack() as stack:
        engines = [
            stack.enter_context(
                FakeEngineProcess(workdir / "traces" / "tokenizer", workdir / "engines" / f"{i}.jsonl", "vllm")
            )
            for i in (1, 2)
        ]
        yield [e.url for e in engines], {e.url: e.record for e in engines}


@contextlib.contextmanager
def vllm_engines(workdir: Path, venv: Path):
    """Two real vLLM servers (1 GiB of KV cache each); yields (their URLs, {})."""
    from ..real.engine_process import tiny_model
    from ..real.vllm import VllmServer
    from ..real.vllm import install as install_vllm

    python = install_vllm(venv)
    model = tiny_model(python, venv, MAX_MODEL_LEN)
    with contextlib.ExitStack() as stack:
        servers = []
        for i in (1, 2):
            server = VllmServer(
                python,
                model,
                max_model_len=MAX_MODEL_LEN,
                kv_cache_gib=1,
                log=workdir / "logs" / f"vllm-{i}.log",
            )
            stack.enter_context(server)
            print(f"vllm {i}: serving at {server.base_url} after {server.started_s:.0f} s")
            servers.append(server)
        yield [s.base_url for s in servers], {}


def _counters(url: str) -> dict[str, float]:
    """A replica's FIGURES counters now, read straight from its /metrics."""
    from fastgen.bakeoff.sampler import parse_metrics
    from fastgen.bakeoff.server import fetch

    sample = parse_metrics(fetch(url + "/metrics").body.decode(), "vllm:")
    quantities = {"requests": "requests", "prompt_tokens": "prompt_tokens", "cached_tokens": "cache_hits"}
    return {name: VLLM.metric(sample, q) or 0.0 for name, q in quantities.items()}


def run_policy(workdir: Path, router_bin: Path, urls: list[str], policy: str) -> tuple[list[str], dict, dict]:
    """The bakeoff through a router with `policy`: (failures, the requests the router sent each replica over it,
    each replica's counters after it)."""
    with RouterProcess(router_bin, urls, policy=policy, log=workdir / "logs" / f"router-{policy}.log") as router:
        before = router.routed()
        begun = time.monotonic()
        options = ("--router-policy", policy, "--scrape-interval", "1", "--timeout", "900", "--rerun", *MODES)
        result = bakeoff(router.base_url, policy, workdir, *options, "--configs", *CONFIGS, timeout_s=3600)
        print(
            f"{policy}: fastgen bakeoff through the router: exit {result.returncode}, {time.monotonic() - begun:.0f} s"
        )
        after = router.routed()
        counters = {url: _counters(url) for url in urls}
        # the router's own account of its choices, kept beside the runs (and its decision counters said here)
        text = router.metrics()
        (workdir / "logs" / f"router-{policy}.metrics").write_text(text)
        for line in text.splitlines():
            if "decisions_total{" in line:
                print(f"{policy}: router {line}")
    if result.returncode != 0:
        return [f"{policy}: fastgen bakeoff exited {result.returncode}: {result.stderr[-800:]}"], {}, {}
    routed = {url: after.get(url, 0.0) - before.get(url, 0.0) for url in urls}
    return [], routed, counters


def _last_sample(folder: Path, url: str) -> dict[str, float]:
    lines = [json.loads(line) for line in (folder / METRICS_FILE).read_text().splitlines() if line.strip()]
    last = [line for line in lines if "replicas" in line][-1]["replicas"][url]
    quantities = {"requests": "requests", "prompt_tokens": "prompt_tokens", "cached_tokens": "cache_hits"}
    return {name: VLLM.metric(last, q) or 0.0 for name, q in quantities.items()}


def _logged(entries: list[dict]) -> dict[str, int]:
    """A fake engine's own account of one run: its answered requests and their prompt and cached tokens."""
    done = [e for e in entries if e.get("status") == 200]
    usage = [e["response"]["usage"] for e in done]
    return {
        "requests": len(done),
        "prompt_tokens": sum(u["prompt_tokens"] for u in usage),
        "cached_tokens": sum((u.get("prompt_tokens_details") or {}).get("cached_tokens") or 0 for u in usage),
    }


def check_policy(
    workdir: Path, policy: str, routed: dict, counters: dict, *, logs: dict[str, Path]
) -> tuple[list[str], dict[str, dict]]:
    """The failures of one policy's runs, and per config its fleet figures (for the summary). A fake engine's log
    holds every policy's runs, one after another: this policy's are the segments after the earlier policies'."""
    earlier = POLICIES.index(policy) * len(CONFIGS)
    failures: list[str] = []
    runs, problems = read_runs(workdir / "reports" / policy)
    failures += [f"{policy}: {p}" for p in problems]
    fleets: dict[str, dict] = {}
    served = {url: 0 for url in routed}
    parts = {url: segments([json.loads(line) for line in path.read_text().splitlines()]) for url, path in logs.items()}
    for number, name in enumerate(CONFIGS, start=1):
        run = runs.get(name)
        if run is None or len(run.repeats) != 1:
            failures.append(f"{policy} {name}: no run")
            continue
        repeat = run.repeats[0]
        record = json.loads((repeat.folder / RUN_FILE).read_text())
        fleet = fleets[name] = record.get("fleet") or {}
        if record["status"] != "completed":
            failures.append(f"{policy} {name}: {record['status']} ({record.get('reason')})")
        if record["identity"]["router"]["policy"] != policy:
            failures.append(f"{policy} {name}: the identity says policy {record['identity']['router']['policy']}")
        resets = (record.get("reset") or {}).get("replicas") or []
        if sorted(r["url"] for r in resets if r.get("verified") is True) != sorted(routed):
            failures.append(f"{policy} {name}: the reset was not verified on every replica: {resets}")
        for row in fleet.get("replicas") or []:
            url = row["url"]
            served[url] += row["requests"] or 0
            if number == len(CONFIGS):  # the last run: the replica's counters now end where its samples ended
                if _last_sample(repeat.folder, url) != counters[url]:
                    failures.append(
                        f"{policy} {name} {url}: its /metrics after the bakeoff {counters[url]}, the run's last "
                        f"sample {_last_sample(repeat.folder, url)}"
                    )
            if url in parts:
                logged = _logged(parts[url][earlier + number])
                if {k: row[k] for k in FIGURES} != logged:
                    failures.append(f"{policy} {name} {url}: run.json says {row}, the engine's log {logged}")
        answered = sum(r.prompt_tokens or 0 for r in repeat.requests)
        if (fleet.get("sum") or {}).get("prompt_tokens") != answered:
            failures.append(f"{policy} {name}: the replicas counted {fleet.get('sum')}, the requests {answered}")
    if {u: int(v) for u, v in routed.items()} != served:
        failures.append(f"{policy}: the router sent {routed}, the replicas counted {served} over the runs")
    return failures, fleets


def _hit(figures: dict) -> Optional[float]:
    prompt = figures.get("prompt_tokens")
    return 100.0 * figures["cached_tokens"] / prompt if prompt else None


def check_report(report: dict, fleets: dict[str, dict[str, dict]]) -> list[str]:
    """The report's replica table shows each run's figures; the policies differ where they should."""
    failures = []
    section = next((s for s in report["sections"] if s["id"] == "replicas"), None)
    if section is None:
        return ["the report has no Replicas section"]
    spread, table = section["tables"]
    for row in (dict(zip(table["columns"], r)) for r in table["rows"]):
        policy = row["policy"]
        shown = {
            "requests": row["requests"],
            "prompt_tokens": row["prompt tokens"],
            "cached_tokens": row["cached tokens"],
        }
        recorded = next(r for r in fleets[policy][row["config"]]["replicas"] if r["url"] == row["replica"])
        if {k: v["value"] if isinstance(v, dict) else v for k, v in shown.items()} != {k: recorded[k] for k in FIGURES}:
            failures.append(f"{row['config']} {policy} {row['replica']}: the report shows {shown}, run.json {recorded}")
    for row in (dict(zip(spread["columns"], r)) for r in spread["rows"]):
        if row["counters = requests"] != "yes":
            failures.append(f"{row['config']} {row['policy']}: the report's counters = requests says no")
    hits = {policy: {name: _hit(f["sum"]) for name, f in by_config.items()} for policy, by_config in fleets.items()}
    for policy, by_config in hits.items():
        control = by_config.get(CONTROL_ARM)
        if control is None or control > CONTROL_HIT_PERCENT_AT_MOST:
            failures.append(f"{policy}: the control arm hit {control} %, more than {CONTROL_HIT_PERCENT_AT_MOST}")
    # which policy hits more is the router's doing, not fastgen's, and varies run to run (e2e/README.md): said, not
    # checked
    rr, ca = (hits.get(p, {}).get(TEST_ARM) for p in POLICIES)
    print(f"{TEST_ARM}: fleet hit {ca} % under cache_aware, {rr} % under round_robin")
    return failures


def stayed(workdir: Path, policy: str, name: str = TEST_ARM) -> tuple[int, int]:
    """(later turns that found their session's previous prompt cached, later turns): how often the router sent a
    turn back to the replica holding the turn before it (vLLM's 32-token blocks: all but the last block)."""
    runs, _ = read_runs(workdir / "reports" / policy)
    sessions: dict[str, list] = {}
    for request in runs[name].repeats[0].requests:
        sessions.setdefault(request.session, []).append(request)
    kept = total = 0
    for turns in sessions.values():
        turns.sort(key=lambda r: r.turn)
        for before, after in zip(turns, turns[1:]):
            total += 1
            kept += (after.cached_tokens or 0) >= (before.prompt_tokens or 0) // 32 * 32 - 32
    return kept, total


def predicted(workdir: Path, policy: str, replicas: int) -> Optional[dict]:
    """`fastgen analyze` of the test arm for `replicas` engines behind `policy`, for the server the policy's runs
    were made against and at their speeds (--server-from, --calibrate): its JSON entry, or None (said) where it
    fails."""
    out = workdir / f"analysis-{policy}.json"
    options = ("--replicas", str(replicas), "--router", policy, "--band", "16", "-q")
    result = analyze_for(workdir, policy, policy, [TEST_ARM], *options, out=out)
    if result.returncode != 0:
        print(f"{policy}: fastgen analyze exited {result.returncode}: {result.stderr.strip()[-300:]}")
        return None
    return json.loads(out.read_text())["configs"][0]


def summary(workdir: Path, fleets: dict[str, dict[str, dict]]) -> None:
    for policy in fleets:
        kept, total = stayed(workdir, policy)
        print(f"{policy} {TEST_ARM}: {kept} of {total} later turns found their previous turn cached")
    # analyze's prediction for the same fleet and policy beside what the router gave: said, not checked (the router's
    # own decision counters say whether it routed by prefix at all: docs/analyze.md, Replicas and routing)
    for policy, by_config in fleets.items():
        fleet = by_config[TEST_ARM]
        entry = predicted(workdir, policy, len(fleet.get("replicas") or []) or 2)
        if entry is not None:
            low, high = entry["hit_percent_infinite_band"] or [entry["hit_percent_infinite"]] * 2
            print(
                f"{policy} {TEST_ARM}: analyze predicts {entry['hit_percent_infinite']:.2f} % ({low:.2f}-{high:.2f}), "
                f"the router gave {_hit(fleet['sum']) or 0:.2f} %"
            )
    for policy, by_config in fleets.items():
        for name, fleet in by_config.items():
            rows = fleet.get("replicas") or []
            each = ", ".join(
                f"{r['requests']} req / {r['prompt_tokens']:,} prompt / {r['cached_tokens']:,} cached "
                f"({_hit(r) or 0:.1f} %)"
                for r in rows
            )
            print(f"{policy} {name}: fleet hit {_hit(fleet['sum']) or 0:.2f} %; per replica: {each}")


def run_router_bakeoff(workdir: Path, engines: str, router_venv: Path, venv: Optional[Path]) -> list[str]:
    workdir = Path(workdir).resolve()
    started = time.monotonic()
    router_bin = install(router_venv)
    dataset(workdir)
    print(f"router installed and dataset generated: {time.monotonic() - started:.0f} s")
    failures: list[str] = []
    fleets: dict[str, dict[str, dict]] = {}
    serving = fake_engines(workdir) if engines == "fake" else vllm_engines(workdir, Path(venv or ".e2e-vllm/venv"))
    with serving as (urls, logs):
        for policy in POLICIES:
            found, routed, counters = run_policy(workdir, router_bin, urls, policy)
            if found:
                return failures + found
            found, fleets[policy] = check_policy(workdir, policy, routed, counters, logs=logs)
            failures += found
    summary(workdir, fleets)
    result, report = compare(workdir, POLICIES, "--force")
    if report is None:
        return failures + exit_problem(result, "fastgen compare")
    return failures + check_report(report, fleets)


def main(argv: Optional[list[str]] = None) -> int:
    p = suite_parser("bakeoff_router", __doc__, ".e2e-router")
    p.add_argument("--engines", choices=("vllm", "fake"), default="vllm")
    add_venv(p, "router", "--router-venv")
    add_venv(p, "vllm", use=" for --engines vllm")
    args = p.parse_args(argv)
    venvs = (args.router_venv.resolve(), args.venv.resolve())
    title = f"router bakeoff e2e ({args.engines} engines)"
    return run_suite(title, args.workdir / "report", run_router_bakeoff, args.workdir, args.engines, *venvs)


if __name__ == "__main__":
    raise SystemExit(main())
