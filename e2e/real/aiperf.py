"""AIPerf 0.13.0 in its own venv, for checking `fastgen analyze --definition aiperf` against `aiperf analyze-trace`
and `fastgen export dag_jsonl` against AIPerf's own dag_jsonl loader.

    python -m e2e.real.aiperf --venv DIR        # install (once), print its python

Its own venv: aiperf pins its dependencies for itself (none clash with inference-perf's today, but nothing keeps
them so). The install takes about 100 s and 1.2 GB; `analyze-trace` and the loader need no tokenizer, no server
and no network.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Optional

__all__ = ["AIPERF_REQUIREMENT", "INSTALL_MARKER", "analyze_trace", "install", "load_dag"]

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


# Run by the venv's python: AIPerf's DagJsonlLoader reads the file as `--custom-dataset-type dag_jsonl` does (its
# pydantic models, the desugaring into branches and join prerequisites, the graph checks), and what it built is
# printed as JSON: per conversation, whether it is a root, the children dispatched before it, and per turn what the
# request carries and which children it forks, spawns and waits for.
_DAG_SUMMARY = """
import json, sys
from aiperf.dataset.loader.dag_jsonl import DagJsonlLoader

loader = DagJsonlLoader(sys.argv[1])
conversations = loader.load()
roots = loader.root_session_ids()
out = {}
for c in conversations:
    branches = {b.branch_id: b for b in c.branches}
    def children(turn, mode, timing="post"):
        return [x for b in turn.branch_ids for x in branches[b].child_conversation_ids
                if branches[b].mode.value == mode and branches[b].dispatch_timing == timing]
    out[c.session_id] = {
        "root": c.session_id in roots,
        "pre": children(c.turns[0], "spawn", "pre"),
        "turns": [
            {
                "messages": len(t.raw_messages or []),
                "max_tokens": t.max_tokens,
                "delay": t.delay,
                "tools": t.raw_tools is not None,
                "extra": t.extra_body,
                "forks": children(t, "fork"),
                "spawns": children(t, "spawn"),
                "joins": [x for p in t.prerequisites for x in branches[p.branch_id].child_conversation_ids],
            }
            for t in c.turns
        ],
    }
print(json.dumps(out, sort_keys=True))
"""


def load_dag(venv: Path, dataset: Path) -> dict:
    """AIPerf's DagJsonlLoader on a dag_jsonl file, in the venv: {conversation: {root, pre, turns: [{messages (a
    count), max_tokens, delay, tools (whether the turn sets them), extra, forks, spawns, joins}]}}."""
    result = subprocess.run(
        [str(_python(venv)), "-c", _DAG_SUMMARY, str(dataset)], capture_output=True, text=True, timeout=600
    )
    if result.returncode != 0:
        raise RuntimeError(f"aiperf's dag_jsonl loader failed ({result.returncode}): {result.stderr[-1500:]}")
    return json.loads(result.stdout.splitlines()[-1])


def main(argv: Optional[list[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="python -m e2e.real.aiperf", description=__doc__.split("\n\n")[0])
    p.add_argument("--venv", type=Path, required=True)
    print(install(p.parse_args(argv).venv))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
