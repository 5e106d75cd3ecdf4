"""AIPerf 0.13.0 in its own venv, for checking `fastgen analyze --definition aiperf` against `aiperf analyze-trace`.

    python -m e2e.aiperf --venv DIR        # install (once), print its python

Its own venv: aiperf pins its dependencies for itself (none clash with inference-perf's today, but nothing keeps
them so). The install takes about 100 s and 1.2 GB; `analyze-trace` needs no tokenizer and no network.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Optional

__all__ = ["AIPERF_REQUIREMENT", "INSTALL_MARKER", "analyze_trace", "install"]

AIPERF_REQUIREMENT = "aiperf==0.13.0"
INSTALL_MARKER = ".fastgen-aiperf-installed"  # written last: its presence means the install finished


def _python(venv: Path) -> Path:
    return Path(venv) / "bin" / "python"


def install(venv: Path) -> Path:
    """The venv's python, installing aiperf there first unless a finished install is there."""
    venv = Path(venv)
    if (venv / INSTALL_MARKER).exists():
        return _python(venv)
    if not _python(venv).exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run([str(_python(venv)), "-m", "pip", "install", "-q", AIPERF_REQUIREMENT], check=True)
    (venv / INSTALL_MARKER).write_text(AIPERF_REQUIREMENT + "\n")
    return _python(venv)


def analyze_trace(venv: Path, trace: Path, out: Path) -> dict:
    """`aiperf analyze-trace TRACE --output-file OUT`, and the JSON it wrote (cache_hit_rate at the top)."""
    aiperf = Path(venv).resolve() / "bin" / "aiperf"  # absolute: it runs from the output's folder
    result = subprocess.run(
        [str(aiperf), "analyze-trace", str(trace), "--output-file", str(out)],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=Path(out).parent,
    )
    if result.returncode != 0 or not Path(out).exists():  # a missing input exits 0 with an error printed
        raise RuntimeError(
            f"aiperf analyze-trace failed ({result.returncode}): {result.stdout[-500:]} {result.stderr[-500:]}"
        )
    return json.loads(Path(out).read_text())


def main(argv: Optional[list[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="python -m e2e.aiperf", description=__doc__.split("\n\n")[0])
    p.add_argument("--venv", type=Path, required=True)
    print(install(p.parse_args(argv).venv))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
