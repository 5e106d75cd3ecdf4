"""A real SGLang on this machine's CPU, for end-to-end runs against a real engine (docs: shared real-sglang-cpu.md).

    python -m e2e.real.sglang --venv DIR [--tokenizer DIR] [--model-name NAME] [--max-total-tokens T] [--context-length N]

installs SGLang into its own Python 3.11 venv (once), builds the tiny random Llama model the real vLLM serves (once,
e2e.real.engine_process.build_model), and serves it on a loopback port until Ctrl-C, printing the URL. In-process:

    python = install(Path(".e2e-sglang/venv"))
    model = build_model(python, TOKENIZER, Path(".e2e-sglang/venv/fastgen-tiny-llama-16384"), max_len=16384)
    with SglangServer(python, model, served_model_name=NAME, max_total_tokens=65536, context_length=16384,
                      log=LOG) as s:
        ...  # s.base_url, s.flush_cache(), s.metrics()

The registry has no CPU build of SGLang's kernel package (sgl-kernel is CUDA-only) and its torchvision is
CUDA-linked, while SGLang 0.5.23 imports both at module level even on its torch-native CPU paths. So install() puts
two small stand-ins from e2e/real/stand_ins/ into the venv (each says what it implements), and pins SGLang exactly: the
kernel stand-in covers only what 0.5.23 calls. Standard library only, like e2e.real.vllm: torch lives in the venv.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any, Optional

from .engine_process import (
    EngineServer,
    add_serving_arguments,
    prepare_serving,
    python_311_venv,
    serve_until_interrupted,
)

__all__ = [
    "SGLANG_REQUIREMENT",
    "RUNTIME_REQUIREMENTS",
    "INSTALL_MARKER",
    "STAND_INS",
    "TOOL_CALL_PARSER",
    "NAME_ENFORCING_TOOL_CALL_PARSER",
    "install",
    "SglangServer",
    "main",
]

SGLANG_REQUIREMENT = "sglang==0.5.23"  # installed with --no-deps: its metadata pins CUDA packages and torch 2.14.1
# What SGLang 0.5.23 needs at run time on this path (the doc's list; pins where the doc pins). torch 2.13.0+cpu comes
# from the local wheel folder pip searches, for Python 3.11 only.
RUNTIME_REQUIREMENTS = (
    "torch==2.13.0+cpu",
    "aiohttp",
    "anthropic",
    "blobfile==3.0.0",
    "compressed-tensors==0.18.0",
    "einops",
    "fastapi",
    "gguf",
    "interegular",
    "llguidance>=1.7.6,<2",
    "msgspec",
    "ninja",
    "numpy",
    "openai==2.8.0",
    "openai-harmony==0.0.4",
    "orjson",
    "packaging",
    "partial_json_parser",
    "pillow",
    "prometheus-client",
    "psutil",
    "pybase64",
    "pydantic",
    "python-dateutil",
    "python-multipart",
    "pyzmq",
    "regex",
    "requests",
    "scipy",
    "sentencepiece==0.2.1",
    "setproctitle",
    "tiktoken",
    "tokenizers==0.23.2",
    "tqdm",
    "transformers==5.19.0",
    "uvicorn",
    "uvloop",
    "watchfiles",
    "xgrammar==0.2.7",
    "xxhash",
    "zstandard",
    "distro",
    "easydict",
    "IPython",
    "dill",
    "jsonschema",
    "soundfile",
)
# CUDA-linked builds from the registry that fail at import against CPU torch; the torchvision stand-in replaces one
UNWANTED = ("torchvision", "torchaudio", "torchcodec")
STAND_INS = Path(__file__).resolve().parent / "stand_ins"  # sgl_kernel/ and torchvision/, copied into site-packages
INSTALL_MARKER = ".fastgen-sglang-installed"  # written last: the requirement and the stand-ins' digest
# importing these pulls in everything the server imports at start (the stand-ins included)
_PROBE = (
    "import sglang.srt.entrypoints.http_server, sglang.srt.managers.scheduler, transformers, sgl_kernel, torchvision"
)
# hermes parses the built-in template's <tool_call>{json}</tool_call> form, but has no grammar of its own that knows
# a named tool_choice (see SglangServer); qwen3_coder has one (xgrammar's native tag) and so enforces the forced name
TOOL_CALL_PARSER = "hermes"
NAME_ENFORCING_TOOL_CALL_PARSER = "qwen3_coder"
FLUSH_WAIT_S = 30.0  # how long flush_cache() lets SGLang wait for running requests to finish


def _stand_ins_digest() -> str:
    digest = hashlib.sha256()
    for path in sorted(STAND_INS.rglob("*.py")):
        digest.update(str(path.relative_to(STAND_INS)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def _marker_text() -> str:
    return f"{SGLANG_REQUIREMENT} stand-ins {_stand_ins_digest()}\n"


def _run_quietly(python: Path, code: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(python), "-c", code],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "SGLANG_USE_CPU_ENGINE": "1", "HF_HUB_OFFLINE": "1"},
    )


def _has_sglang(python: Path) -> bool:
    """Whether the pinned SGLang distribution is installed (not whether it imports: that needs the stand-ins)."""
    wanted = SGLANG_REQUIREMENT.split("==")[1]
    probe = _run_quietly(python, "import importlib.metadata as m; print(m.version('sglang'))")
    return probe.returncode == 0 and probe.stdout.strip() == wanted


def _copy_stand_ins(python: Path) -> None:
    """Replace sgl_kernel/ and torchvision/ in the venv's site-packages with the project's stand-ins."""
    purelib = Path(_run_quietly(python, "import sysconfig; print(sysconfig.get_paths()['purelib'])").stdout.strip())
    for package in sorted(p for p in STAND_INS.iterdir() if p.is_dir() and not p.name.startswith("__")):
        target = purelib / package.name
        if target.exists():
            shutil.rmtree(target)
        shutil.copytree(package, target, ignore=shutil.ignore_patterns("__pycache__"))


def install(venv: Path, *, quiet: bool = True) -> Path:
    """Install SGLang 0.5.23 and its CPU stand-ins into `venv` (created with python3.11 if missing); return its python.

    Idempotent: a marker written at the very end of a successful install (the requirement and a digest of the
    stand-ins) makes a later call return at once; a changed stand-in is copied again without reinstalling anything.
    Otherwise: the runtime requirements (RUNTIME_REQUIREMENTS), `pip uninstall -y torchvision torchaudio torchcodec`
    (CUDA-linked registry builds), `pip install --no-deps sglang==0.5.23` (pip warns about its torch pin, harmlessly),
    then the stand-ins, and an import probe of the server's modules. About 3.5 minutes and 2.8 GB the first time.
    """
    venv = Path(venv).absolute()
    python, marker = venv / "bin" / "python", venv / INSTALL_MARKER
    if python.exists() and marker.exists() and marker.read_text() == _marker_text():
        return python
    python_311_venv(venv, SGLANG_REQUIREMENT)
    if not _has_sglang(python):
        pip = [str(python), "-m", "pip"] + (["-q"] if quiet else [])
        subprocess.run(pip + ["install", *RUNTIME_REQUIREMENTS], check=True)
        subprocess.run(pip + ["uninstall", "-y", *UNWANTED], check=True)  # absent ones are only warned about
        subprocess.run(pip + ["install", "--no-deps", SGLANG_REQUIREMENT], check=True)
    _copy_stand_ins(python)
    probe = _run_quietly(python, _PROBE)
    if probe.returncode != 0:
        raise RuntimeError(
            f"SGLang's server modules do not import in {venv} after the install:\n{probe.stderr[-4000:]}"
        )
    marker.write_text(_marker_text())
    return python


class SglangServer(EngineServer):
    """SGLang's server (`python -m sglang.launch_server`) as a child process group on a loopback port, on the CPU.

    Start, readiness (GET /v1/models) and stop by process group are e2e.real.engine_process.EngineServer's: SGLang runs
    three processes (launcher with the tokenizer manager, scheduler, detokenizer) and exits 7-10 s after SIGTERM.

    Flags: --device cpu --dtype float32 --attention-backend torch_native --sampling-backend pytorch
    --disable-overlap-schedule (the CPU paths that need no sgl_kernel), --sleep-on-idle (an idle scheduler
    otherwise spins a whole core polling its sockets: 96% of one of two), --enable-metrics (/metrics),
    --enable-cache-report (prompt_tokens_details.cached_tokens in usage), --tool-call-parser (hermes by default),
    --context-length, and --max-total-tokens, which is mandatory here: without it the KV pool takes 72% of the
    machine's memory; /metrics reports it as sglang:max_total_num_tokens, and at this model's 512 bytes per token it
    is how a test makes the cache small enough to evict. page_size, when given, adds --page-size (1 by default: hits
    end at any token). Environment: SGLANG_USE_CPU_ENGINE=1, SGLANG_TOOL_STRICT_LEVEL=2 (every tool's parameter
    schema enforced), HF_HUB_OFFLINE=1, TRANSFORMERS_OFFLINE=1, TOKENIZERS_PARALLELISM=false.

    Named tool_choice, measured: SGLang 0.5.23 renders only the forced tool into the prompt, but with the hermes
    parser its grammar is one structural tag over all the request's tools (at least one call), whatever
    SGLANG_TOOL_STRICT_LEVEL says (level 2 only adds each tool's schema). A trained model follows the prompt; this
    random one answers a random tool's name (3 of 16 forced calls over 4 tools named the forced one, at level 2 and
    with strict tools alike). tool_call_parser="qwen3_coder" builds xgrammar's own tag, which holds the forced name
    (16 of 16); its calls are XML, not the template's JSON, which a replay of recorded histories does not mind.
    """

    ENGINE = "SGLang"
    STOP_GRACE_S = 20.0  # it exits 7-10 s after SIGTERM; SIGKILL takes what is left

    def __init__(
        self,
        python: Path,
        model_dir: Path,
        *,
        max_total_tokens: int,
        context_length: int,
        page_size: Optional[int] = None,
        tool_call_parser: str = TOOL_CALL_PARSER,
        **common: Any,
    ) -> None:
        """`common`: EngineServer's (log, served_model_name, port, extra_args, extra_env, start_timeout_s)."""
        if not max_total_tokens > 0 or not context_length > 0:
            raise ValueError(
                f"max_total_tokens and context_length must be positive, got {max_total_tokens} and {context_length}"
            )
        super().__init__(python, model_dir, **common)
        self.page_size, self.tool_call_parser = page_size, tool_call_parser
        self.max_total_tokens, self.context_length = int(max_total_tokens), int(context_length)

    def command(self) -> list[str]:
        model = str(self.model_dir)
        cmd = [
            str(self.python),
            "-m",
            "sglang.launch_server",
            "--model-path",
            model,
            "--tokenizer-path",
            model,
            *self.address(),
            "--device",
            "cpu",
            "--dtype",
            "float32",
            "--context-length",
            str(self.context_length),
            "--max-total-tokens",
            str(self.max_total_tokens),
            "--enable-metrics",
            "--enable-cache-report",
            "--tool-call-parser",
            self.tool_call_parser,
            "--attention-backend",
            "torch_native",
            "--sampling-backend",
            "pytorch",
            "--disable-overlap-schedule",
            "--sleep-on-idle",
        ]
        if self.page_size is not None:
            cmd += ["--page-size", str(int(self.page_size))]
        return cmd + self.extra_args

    def environment(self) -> dict[str, str]:
        env = {
            **os.environ,
            "SGLANG_USE_CPU_ENGINE": "1",
            "SGLANG_TOOL_STRICT_LEVEL": "2",
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            "TOKENIZERS_PARALLELISM": "false",
        }
        return {**env, **self.extra_env}

    def flush_cache(self, *, wait_s: float = FLUSH_WAIT_S) -> bool:
        """Empty SGLang's radix cache; True when it did (200 "Cache flushed."), False when it refused (400).

        SGLang flushes only when fully idle, and a request whose last chunk the client has already read can still be
        running for a moment: a flush sent right after it is refused. So this asks SGLang to wait up to wait_s for
        idleness itself (POST /flush_cache?timeout=wait_s: 400 "Timed out waiting for idle state." past it);
        wait_s=0 asks once. Prometheus counters (sglang:cached_tokens_total, ...) are not reset.
        """
        query = f"?timeout={wait_s:g}" if wait_s > 0 else ""
        status, _ = self.post("/flush_cache" + query, timeout=wait_s + 60)
        return status == 200


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m e2e.real.sglang",
        description=(
            "Install SGLang (CPU, with its stand-ins) into a venv, build a tiny random model over a tokenizer, and serve "
            "it until Ctrl-C."
        ),
    )
    add_serving_arguments(parser, engine="SGLang", slug="sglang", window="context-length")
    parser.add_argument(
        "--max-total-tokens",
        type=int,
        default=1 << 20,
        help="KV pool size in tokens (default 1,048,576: 512 MiB); small to force eviction",
    )
    parser.add_argument("--context-length", type=int, default=32768, help="context window (default 32768)")
    parser.add_argument("--page-size", type=int, default=None, help="radix cache page size (SGLang's default 1)")
    parser.add_argument(
        "--tool-call-parser",
        default=TOOL_CALL_PARSER,
        help=f"SGLang's tool-call parser (default {TOOL_CALL_PARSER}; "
        f"{NAME_ENFORCING_TOOL_CALL_PARSER} holds a named tool_choice even with a random model)",
    )
    args = parser.parse_args(argv)

    server = SglangServer(
        **prepare_serving(args, install(args.venv), args.context_length, "sglang"),
        max_total_tokens=args.max_total_tokens,
        context_length=args.context_length,
        page_size=args.page_size,
        tool_call_parser=args.tool_call_parser,
    )
    return serve_until_interrupted(server, args.model_name)


if __name__ == "__main__":
    raise SystemExit(main())
