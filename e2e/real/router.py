"""A real router from the package registry in front of engines on loopback: vllm-router 0.1.17, a Rust binary in a
wheel, installed into a venv of its own (with sglang-router 0.3.2 beside it, whose command docs/router.md gives and
tests/e2e/test_e2e_router.py runs as written there).

    python -m e2e.real.router --venv DIR --worker URL --worker URL [--policy cache_aware] [--port N]

serves the workers behind one URL until Ctrl-C, printing it and its Prometheus endpoint. In-process:

    router_bin = install(Path(".e2e-router/venv"))
    with RouterProcess(router_bin, [url_a, url_b], policy="round_robin", log=LOG) as router:
        ...  # router.base_url, router.metrics_url, router.routed()

What it is (seen with 0.1.17): `vllm-router --worker-urls A B --policy P` proxies the OpenAI API to the workers;
its policies are random, round_robin, cache_aware (a radix tree of the text it sent to each worker, with load
balancing past --balance-abs-threshold), power_of_two, consistent_hash, kv_aware and sticky_least_loaded. It lists
its workers at GET /workers and GET /list_workers, and hands paths it does not know (`/metrics`,
`/reset_prefix_cache`, `/version`) to one worker: a bakeoff pointed at it alone would reset and read one replica.
Its own metrics are on a second port (--prometheus-port): vllm_router_processed_requests_total{worker} counts the
requests it sent each worker, vllm_router_policy_decisions_total{policy, worker} names its policy. It waits for
every worker's GET /health before serving, checking every --worker-startup-check-interval seconds (30 by default:
1 here). The wheel is abi3 for x86_64 Linux with its own OpenSSL; its Python launcher needs only setproctitle and a
few web packages (about 20 s and 150 MB to install).

Standard library only: the router runs as its own process group, stopped by that group on every exit path.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Optional, Sequence

from .engine_process import HOST, free_port, hold

__all__ = ["POLICIES", "REQUIREMENTS", "ROUTER_REQUIREMENT", "RouterProcess", "install", "main", "routed_per_worker"]

ROUTER_REQUIREMENT = "vllm-router==0.1.17"
# both routers of docs/router.md, in one venv: their launchers need the same few web packages
REQUIREMENTS = (ROUTER_REQUIREMENT, "sglang-router==0.3.2")
INSTALL_MARKER = ".fastgen-router-installed"  # written last: its presence means the whole install succeeded
POLICIES = ("random", "round_robin", "cache_aware", "power_of_two", "consistent_hash")
START_TIMEOUT_S = 60.0
STOP_GRACE_S = 10.0
ROUTED = "vllm_router_processed_requests_total"  # the requests it sent each worker, by its `worker` label


def install(venv: Path, *, quiet: bool = True) -> Path:
    """Install vllm-router and sglang-router (REQUIREMENTS) into `venv` (created if missing) and return its
    `vllm-router` executable (`sglang-router` is beside it). Idempotent: the marker written at the end of a
    successful install makes a later call return at once."""
    venv = Path(venv).absolute()
    executable = venv / "bin" / "vllm-router"
    marker = venv / INSTALL_MARKER
    wanted = "\n".join(REQUIREMENTS)
    if executable.exists() and marker.exists() and marker.read_text().strip() == wanted:
        return executable
    if not (venv / "bin" / "python").exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = [str(venv / "bin" / "python"), "-m", "pip"] + (["-q"] if quiet else [])
    subprocess.run(pip + ["install", *REQUIREMENTS], check=True)
    for requirement in REQUIREMENTS:
        command = venv / "bin" / requirement.split("==")[0]
        if not command.exists():
            raise RuntimeError(f"{requirement} installed no {command.name} command into {venv}")
    marker.write_text(wanted + "\n")
    return executable


def _get(url: str, timeout: float = 5.0) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as answer:
            return answer.status, answer.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def routed_per_worker(metrics_text: str) -> dict[str, float]:
    """The requests the router sent each worker, from its Prometheus text (ROUTED, by `worker`)."""
    found: dict[str, float] = {}
    for line in metrics_text.splitlines():
        if not line.startswith(ROUTED + "{"):
            continue
        labels, value = line[len(ROUTED) + 1 :].rsplit("} ", 1)
        for pair in labels.split(","):
            key, _, quoted = pair.partition("=")
            if key.strip() == "worker":
                worker = quoted.strip().strip('"').rstrip("/")
                found[worker] = found.get(worker, 0.0) + float(value)
    return found


class RouterProcess:
    """vllm-router in front of `workers` on a loopback port, as its own process group.

    `start()` launches it and waits until GET /workers lists every worker and GET /health answers 200 (it
    checks the workers' health before serving); it fails with the log's tail if the process exits first or
    START_TIMEOUT_S passes. `stop()` ends the whole group (SIGTERM, then SIGKILL), on every exit path."""

    def __init__(
        self,
        executable: Path,
        workers: Sequence[str],
        *,
        policy: str = "cache_aware",
        log: Path,
        port: int = 0,
        metrics_port: int = 0,
        extra_args: Sequence[str] = (),
    ) -> None:
        if policy not in POLICIES:
            raise ValueError(f"unknown policy {policy!r}; use one of {', '.join(POLICIES)}")
        self.executable, self.workers, self.policy = Path(executable), [w.rstrip("/") for w in workers], policy
        self.log, self.port, self.metrics_port, self.extra_args = Path(log), port, metrics_port, list(extra_args)
        self.process: Optional[subprocess.Popen] = None

    @property
    def base_url(self) -> str:
        return f"http://{HOST}:{self.port}"

    @property
    def metrics_url(self) -> str:
        return f"http://{HOST}:{self.metrics_port}/metrics"

    def command(self) -> list[str]:
        return [
            str(self.executable),
            "--host",
            HOST,
            "--port",
            str(self.port),
            "--worker-urls",
            *self.workers,
            "--policy",
            self.policy,
            "--prometheus-host",
            HOST,
            "--prometheus-port",
            str(self.metrics_port),
            "--worker-startup-check-interval",
            "1",
            *self.extra_args,
        ]

    def start(self) -> str:
        if self.process is not None:
            raise RuntimeError("this router was already started")
        self.port, self.metrics_port = self.port or free_port(), self.metrics_port or free_port()
        self.log.parent.mkdir(parents=True, exist_ok=True)
        started = time.monotonic()
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen(
                self.command(), stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        try:
            while not self._ready():
                if self.process.poll() is not None:
                    raise RuntimeError(f"vllm-router exited with {self.process.returncode}:\n{self.log_tail()}")
                if time.monotonic() - started > START_TIMEOUT_S:
                    raise TimeoutError(f"vllm-router did not serve within {START_TIMEOUT_S:.0f} s:\n{self.log_tail()}")
                time.sleep(0.5)
        except BaseException:
            self.stop()
            raise
        return self.base_url

    def _ready(self) -> bool:
        # GET /workers: vllm-router and sglang-router both list their workers there (sglang-router 0.3.2 has no
        # /list_workers)
        with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
            status, body = _get(self.base_url + "/workers")
            listed = {w["url"].rstrip("/") for w in json.loads(body)["workers"]} if status == 200 else set()
            return listed == set(self.workers) and _get(self.base_url + "/health")[0] == 200
        return False

    def metrics(self) -> str:
        status, body = _get(self.metrics_url)
        if status != 200:
            raise RuntimeError(f"GET {self.metrics_url} answered {status}")
        return body.decode()

    def routed(self) -> dict[str, float]:
        """The requests it has sent each worker so far."""
        return routed_per_worker(self.metrics())

    def stop(self) -> None:
        process, self.process = self.process, None
        if process is None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)

    def log_tail(self, chars: int = 3000) -> str:
        try:
            return self.log.read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    def __enter__(self) -> "RouterProcess":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m e2e.real.router",
        description="Serve engines behind vllm-router on a loopback port until Ctrl-C.",
    )
    parser.add_argument("--venv", type=Path, required=True, help="the router's venv (created and installed if missing)")
    parser.add_argument("--worker", action="append", required=True, help="an engine's base URL (repeat it)")
    parser.add_argument("--policy", choices=POLICIES, default="cache_aware")
    parser.add_argument("--port", type=int, default=0, help="loopback port (default: a free one)")
    parser.add_argument("--log", type=Path, default=None, help="its log (default: VENV/router-PORT.log)")
    args = parser.parse_args(argv)
    executable = install(args.venv)
    port = args.port or free_port()
    router = RouterProcess(
        executable, args.worker, policy=args.policy, port=port, log=args.log or args.venv / f"router-{port}.log"
    )

    def ready() -> str:
        return f"{router.base_url}  (policy {router.policy}; its metrics: {router.metrics_url}; Ctrl-C stops it)"

    return hold(router, "vllm-router", ready)


if __name__ == "__main__":
    raise SystemExit(main())
