"""Install every real engine's venv where the suites look for it (vLLM, SGLang, the routers, AIPerf), one after the
other, so CI can do it in the background while the unit tests run: each install is idempotent (a marker at its end),
and the suites that come later find theirs done.

    python -m e2e.suites.venvs
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from ..real import aiperf, router, sglang, vllm
from .runner import CHECKOUT, VENVS

AIPERF_VENV = ".e2e-aiperf/venv"  # the Makefile's e2e-aiperf target installs and reads it there


def main() -> int:
    installs = [
        ("vLLM", vllm.install, VENVS["vllm"]),
        ("SGLang", sglang.install, VENVS["sglang"]),
        ("the routers", router.install, VENVS["router"]),
    ]
    for what, install, (variable, default, _) in installs:
        _timed(what, install, Path(os.environ.get(variable, default)))
    _timed("AIPerf", aiperf.install, Path(AIPERF_VENV))
    return 0


def _timed(what: str, install, venv: Path) -> None:
    started = time.monotonic()
    install(venv if venv.is_absolute() else CHECKOUT / venv)
    print(f"{what} installed in {venv}: {time.monotonic() - started:.0f} s", flush=True)


if __name__ == "__main__":
    sys.exit(main())
