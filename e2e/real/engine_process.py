"""What the real engines of the end-to-end suite share: a Python 3.11 venv of their own, the tiny random model they
serve, a loopback port, a server run as its own process group that is stopped by that group on every exit path, and
the command line that serves one until Ctrl-C.

e2e.real.vllm and e2e.real.sglang build on it; each says which command and environment its engine needs. Standard
library only: the engines' torch lives in their venvs, which these helpers drive through subprocesses.
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
from typing import Any, Callable, Mapping, Optional, Sequence

__all__ = [
    "HOST",
    "PYTHON",
    "DEFAULT_MODEL",
    "TOKENIZER",
    "build_model",
    "free_port",
    "group_members",
    "python_311_venv",
    "EngineServer",
    "add_serving_arguments",
    "prepare_serving",
    "serve_until_interrupted",
]

HOST = "127.0.0.1"  # loopback only: the servers check nothing and let anyone empty their caches
PYTHON = "python3.11"  # both engines pin torch 2.13.0+cpu, which resolves only for Python 3.11 on these machines
MODEL_MARKER = ".fastgen-model.json"  # the build parameters; a model folder is reused only when they match
MODEL_RECIPE = 1  # bump when _BUILD_SCRIPT changes, so older builds are rebuilt
DEFAULT_MODEL = "meta-llama/Llama-3.3-70B-Instruct"  # fastgen's default --model, so generated configs work as is
TOKENIZER = Path(__file__).resolve().parents[2] / "fastgen" / "data" / "builtin-tokenizer"
# from launch to the first /v1/models answer: vLLM compiles on a first start (58-105 s on 2 cores; later ones reuse the
# cache, 31-48 s), SGLang imports for 37-70 s on a quiet machine, over 2 minutes under load
START_TIMEOUT_S = 300.0


def python_311_venv(venv: Path, requirement: str) -> Path:
    """The python of `venv`, created with python3.11 if missing; RuntimeError if it is another Python."""
    python = Path(venv) / "bin" / "python"
    if not python.exists():
        subprocess.run([PYTHON, "-m", "venv", str(venv)], check=True)
    version = subprocess.run(
        [str(python), "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    if version != "3.11":
        raise RuntimeError(f"{venv} runs Python {version}; {requirement} needs a Python 3.11 venv")
    return python


# Run by an engine venv's python (it has torch and transformers): argv = tokenizer_dir, out_dir, max_len, seed.
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
    """Build the tiny random Llama model both real engines serve, in `out`, and return `out`.

    No hub: a LlamaConfig with the tokenizer's whole vocabulary (32,768 for the built-in one), hidden 64,
    intermediate 128, 2 layers, 2 attention heads, 1 KV head, head size 32, `max_position_embeddings = max_len`
    (vLLM refuses a --max-model-len above it), input and output embeddings tied (2.1 M parameters, most of them the
    32768 x 64 embedding), bos/eos/pad from the tokenizer's special tokens (the built-in one has
    no bos, so pad stands in), initialised from a fixed seed so every build is the same model. The point is a real
    engine path (tokenizer, chat template, prefix cache, streaming, tool parser), not text.
    Saved with save_pretrained (safetensors) plus generation_config.json, and the tokenizer's tokenizer.json and
    tokenizer_config.json (with its chat template, which the engines apply) copied beside it.

    Runs under `python` (an engine venv's): fastgen's venv has no torch. Idempotent: a marker with the build
    parameters, written last, makes a matching later call return at once; a build goes to a sibling folder that is
    renamed into place, so an interrupted build never leaves a half model at `out`.
    """
    tokenizer_dir, out = Path(tokenizer_dir).absolute(), Path(out).absolute()
    wanted = {
        "recipe": MODEL_RECIPE,
        "tokenizer": str(tokenizer_dir),
        "max_len": int(max_len),
        "seed": int(seed),
        "tokenizer_json_bytes": (tokenizer_dir / "tokenizer.json").stat().st_size,
    }
    marker = out / MODEL_MARKER
    if marker.exists():
        with contextlib.suppress(ValueError):
            if json.loads(marker.read_text()).get("params") == wanted:
                return out
    staging = out.with_name(out.name + ".building")
    _remove_tree(staging)
    staging.mkdir(parents=True)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    done = subprocess.run(
        [str(python), "-c", _BUILD_SCRIPT, str(tokenizer_dir), str(staging), str(max_len), str(seed)],
        env=env,
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise RuntimeError(f"building the model failed ({done.returncode}):\n{done.stderr[-4000:]}")
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    (staging / MODEL_MARKER).write_text(json.dumps({"params": wanted, "built": summary}, indent=1) + "\n")
    _remove_tree(out)
    staging.rename(out)
    return out


def tiny_model(python: Path, venv: Path, max_len: int) -> Path:
    """build_model's model over the built-in tokenizer, in VENV/fastgen-tiny-llama-MAX_LEN (built once there; the same
    seed, so the same weights, in every engine's venv)."""
    return build_model(python, TOKENIZER, venv / f"fastgen-tiny-llama-{max_len}", max_len)


def _remove_tree(path: Path) -> None:
    if path.is_dir():
        shutil.rmtree(path)
    elif path.exists():
        path.unlink()


def free_port() -> int:
    """A loopback port nobody listens on now (bound and released; the server binds it a moment later)."""
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


class EngineServer:
    """An engine's HTTP server as a child process group on a loopback port.

    A subclass sets ENGINE (its name in messages) and STOP_GRACE_S, and implements `command()` and `environment()`.
    `start()` launches the command in its own session, so the server and everything it spawns share one process
    group, and waits until GET /v1/models answers; it fails with the log's first error line and tail if the process
    exits first or start_timeout_s passes. `stop()` ends that whole group (SIGTERM, STOP_GRACE_S, then SIGKILL), on
    every exit path: a failed start, the context manager's exit (exception or not), or a second call (a no-op).
    """

    ENGINE = "engine"
    STOP_GRACE_S = 20.0

    def __init__(
        self,
        python: Path,
        model_dir: Path,
        *,
        log: Path,
        served_model_name: str = DEFAULT_MODEL,
        port: int = 0,
        extra_args: Sequence[str] = (),
        extra_env: Optional[Mapping[str, str]] = None,
        start_timeout_s: float = START_TIMEOUT_S,
    ) -> None:
        self.python, self.model_dir = Path(python), Path(model_dir).absolute()
        self.served_model_name = served_model_name
        self.port, self.log, self.extra_args = int(port), Path(log), list(extra_args)
        self.extra_env, self.start_timeout_s = dict(extra_env or {}), start_timeout_s
        self.process: Optional[subprocess.Popen] = None
        self.started_s: Optional[float] = None  # seconds from launch to the first /v1/models answer

    @property
    def base_url(self) -> str:
        """http://127.0.0.1:PORT, without /v1 (what fastgen's --base-url takes)."""
        return f"http://{HOST}:{self.port}"

    def command(self) -> list[str]:
        raise NotImplementedError

    def address(self) -> list[str]:
        """The serving command's options for the name it answers to and where: every engine takes the same."""
        return ["--served-model-name", self.served_model_name, "--host", HOST, "--port", str(self.port)]

    def environment(self) -> dict[str, str]:
        raise NotImplementedError

    def start(self) -> str:
        """Launch the server and wait for it; returns base_url. On any failure the process group is gone."""
        if self.process is not None:
            raise RuntimeError("this server was already started")
        if self.port == 0:
            self.port = free_port()
        self.log.parent.mkdir(parents=True, exist_ok=True)
        launched = time.monotonic()
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen(
                self.command(),
                env=self.environment(),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        try:
            self._wait_ready(launched)
        except BaseException:  # KeyboardInterrupt included: never leave an engine behind
            self.stop()
            raise
        self.started_s = time.monotonic() - launched
        return self.base_url

    def _wait_ready(self, launched: float) -> None:
        process = self.process
        assert process is not None  # start launched it
        while True:
            code = process.poll()
            if code is not None:
                raise RuntimeError(
                    f"{self.ENGINE} exited with code {code} before serving: {self.root_cause()}\n"
                    f"{self.log}:\n{self.log_tail()}"
                )
            with contextlib.suppress(OSError, ValueError):
                status, _ = self.get("/v1/models", timeout=5)
                if status == 200:
                    return
            if time.monotonic() - launched > self.start_timeout_s:
                raise TimeoutError(
                    f"{self.ENGINE} did not serve /v1/models within {self.start_timeout_s:.0f} s; "
                    f"{self.log}:\n{self.log_tail()}"
                )
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
            process.wait(timeout=self.STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            pass
        # the engine's worker processes may outlive the API process; whatever is left of the group goes now
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(group, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=10)
        deadline = time.monotonic() + 10
        while group_members(group) and time.monotonic() < deadline:  # SIGKILL lands asynchronously
            time.sleep(0.1)

    def root_cause(self) -> str:
        """The first `...Error: ...` line of the log: the engine's own error (a cache too small, an unknown flag),
        which the launcher's closing traceback often only calls a failed initialisation."""
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

    def request(
        self, method: str, path: str, body: Optional[dict] = None, *, timeout: float = 300
    ) -> tuple[int, bytes]:
        """(status, body) of one HTTP request to the server; HTTP errors are returned, not raised."""
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(
            self.base_url + path, data=data, method=method, headers={"Content-Type": "application/json"} if data else {}
        )
        try:
            with urllib.request.urlopen(req, timeout=timeout) as response:
                return response.status, response.read()
        except urllib.error.HTTPError as err:
            return err.code, err.read()

    def metrics(self) -> str:
        """The Prometheus text exposition of GET /metrics."""
        status, body = self.get("/metrics")
        if status != 200:
            raise RuntimeError(f"GET /metrics answered {status}")
        return body.decode()

    def rss_bytes(self) -> int:
        """Resident memory of the server's whole process group, from /proc."""
        if self.process is None:
            return 0
        total = 0
        for pid in group_members(self.process.pid):
            with contextlib.suppress(OSError, ValueError, IndexError):
                for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1]) * 1024
        return total

    def __enter__(self) -> "EngineServer":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def add_serving_arguments(parser: argparse.ArgumentParser, *, engine: str, slug: str, window: str) -> None:
    """The options every engine's serving command takes: --venv, --tokenizer, --model-name, --model-dir, --port,
    --log (`window` names the engine's context-length option in the help, `slug` the default log's name)."""
    parser.add_argument(
        "--venv", type=Path, required=True, help=f"the Python 3.11 venv for {engine} (created if missing)"
    )
    parser.add_argument(
        "--tokenizer",
        type=Path,
        default=TOKENIZER,
        help="folder with tokenizer.json and tokenizer_config.json (default: fastgen's built-in)",
    )
    parser.add_argument("--model-name", default=DEFAULT_MODEL, help="served model name (default: fastgen's --model)")
    parser.add_argument(
        "--model-dir",
        type=Path,
        default=None,
        help=f"where the model is built (default: VENV/fastgen-tiny-llama-{window.upper()})",
    )
    parser.add_argument("--port", type=int, default=0, help="loopback port (default: a free one)")
    parser.add_argument("--log", type=Path, default=None, help=f"server log (default: VENV/{slug}-server-PORT.log)")


def prepare_serving(args: argparse.Namespace, python: Path, max_len: int, slug: str) -> dict[str, Any]:
    """An EngineServer's common arguments from add_serving_arguments' options (python, model folder, served name,
    port, log): the model built there (once) under `python`."""
    model_dir = args.model_dir or args.venv / f"fastgen-tiny-llama-{max_len}"
    build_model(python, args.tokenizer, model_dir, max_len)
    port = args.port or free_port()
    log = args.log or args.venv / f"{slug}-server-{port}.log"
    return {"python": python, "model_dir": model_dir, "served_model_name": args.model_name, "port": port, "log": log}


def serve_until_interrupted(server: EngineServer, model_name: str) -> int:
    """Start `server`, print its URL, and keep it as `hold` does."""
    print(
        f"starting {server.ENGINE} on port {server.port or '(free)'} (log: {server.log}) ...",
        file=sys.stderr,
        flush=True,
    )

    def ready() -> str:
        return f"{server.base_url}  (model {model_name}, started in {server.started_s:.0f} s; Ctrl-C stops it)"

    return hold(server, server.ENGINE, ready)


def hold(server: Any, name: str, ready: Callable[[], str]) -> int:
    """Start `server` (a context manager with a `process` and a `log_tail()`), print `ready()`, and keep it until
    Ctrl-C, SIGTERM or SIGHUP (130 or 128+signal, the server stopped) or until it exits by itself (1, with the
    log's tail)."""
    # SIGTERM (or a closed terminal) unwinds like Ctrl-C, so the with-block stops the server's group either way;
    # SIGINT is set explicitly because a shell starting us in the background (`cmd &`) leaves it ignored
    signal.signal(signal.SIGINT, signal.default_int_handler)
    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, lambda number, _frame: sys.exit(128 + number))
    try:
        with server:
            print(ready(), flush=True)
            while server.process is not None and server.process.poll() is None:
                time.sleep(1.0)
            print(f"{name} exited:\n{server.log_tail()}", file=sys.stderr)
            return 1
    except KeyboardInterrupt:
        return 130
