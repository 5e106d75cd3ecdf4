"""`fastgen analyze --calibrate RUN_DIR`: the service model's speeds as a bakeoff run measured them, so that the
prediction is for that server (how many sessions overlap depends on how fast it serves them).

RUN_DIR is one run folder (OUT/LABEL/<scenario>/<config>/repeat-K, as `fastgen bakeoff` writes it) or a folder above
several (a config's repeats, a whole label): the requests of every run under it are pooled. From inference-perf's
per-request records (per_request_lifecycle_metrics.json), over the requests that succeeded and have all five figures:

    prefill tokens/s = sum of (prompt_tokens - cached_tokens) / sum of time_to_first_token
    decode tokens/s  = sum of output_tokens / sum of (request_latency - time_to_first_token)

What this assumes:
- prompt and cached tokens are the server's own `usage` (cached_tokens 0 when it sent no details, as vLLM and SGLang
  do when nothing was cached); output tokens inference-perf's count (else the server's completion_tokens);
- TTFT is all prefill: queueing, tokenization and the HTTP round trip are counted as prefill time, so the prefill
  speed is an effective one, under that run's load (a run at low concurrency reads faster than a busy one);
- the decode time is every output token's, the first one included (the simulation's end is start + uncached prompt /
  prefill + output / decode, so the sums give back the run's summed latencies);
- requests without a TTFT are left out: inference-perf does not time tool-call turns (they stream tool_calls deltas);
- run.json, where there is one, only names the server (engine, version, KV capacity) in the summary.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from ..bakeoff.runs import RUN_FILE, read_run
from ..bakeoff.status import PER_REQUEST_FILE
from ..errors import SpecError
from .schedule import ServiceModel

__all__ = ["Calibration", "calibrate", "measured_speeds"]

_FIX = "give a run folder fastgen bakeoff wrote (OUT/LABEL/<scenario>/<config>/repeat-K) or a folder above runs"


@dataclass(frozen=True)
class Calibration:
    service: ServiceModel
    source: Path
    requests: int  # the requests the speeds were measured over
    server: str = ""  # "vllm 0.11.0, KV cache 100,000 tokens" from run.json; "" without one

    def describe(self) -> str:
        server = f" of {self.server}" if self.server else ""
        return f"calibrated from {self.source}: {self.requests:,} requests{server}"


def calibrate(run_dir: Path) -> Calibration:
    """The speeds measured over every run under `run_dir`; a SpecError naming it when it holds none."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise SpecError(f"--calibrate {run_dir} is not a folder; {_FIX}")
    folders = _run_folders(run_dir)
    if not folders:
        raise SpecError(f"--calibrate {run_dir} holds no {PER_REQUEST_FILE}; {_FIX}")
    entries = []
    for folder in folders:
        entries += _entries(folder / PER_REQUEST_FILE)
    prefill, decode, used = measured_speeds(entries)
    if prefill is None or decode is None:
        raise SpecError(
            f"--calibrate {run_dir}: none of its {len(entries)} requests has the prompt, cached and "
            f"output tokens, TTFT and latency to measure {'prefill' if prefill is None else 'decode'} "
            f"speed from (failed runs, or a server that reports no usage); calibrate from a completed "
            f"run, or give --prefill-tokens-per-s and --decode-tokens-per-s"
        )
    return Calibration(ServiceModel(prefill, decode), run_dir, used, _server(folders))


def measured_speeds(entries: list[dict]) -> tuple[Optional[float], Optional[float], int]:
    """(prefill tokens/s, decode tokens/s, requests used) over inference-perf per-request entries (the module's
    sums); a speed is None where its time or tokens sum to nothing."""
    uncached = ttft_sum = output = decode_sum = 0.0
    used = 0
    for entry in entries:
        figures = _figures(entry)
        if figures is None:
            continue
        prompt, cached, out, ttft, latency = figures
        uncached += max(0, prompt - cached)
        ttft_sum += ttft
        output += out
        decode_sum += max(0.0, latency - ttft)
        used += 1
    prefill = uncached / ttft_sum if uncached > 0 and ttft_sum > 0 else None
    decode = output / decode_sum if output > 0 and decode_sum > 0 else None
    return prefill, decode, used


def _figures(entry: dict) -> Optional[tuple[int, int, int, float, float]]:
    """(prompt, cached, output tokens, TTFT s, latency s) of a successful request that has them all, else None."""
    if not isinstance(entry, dict) or entry.get("error") is not None:
        return None
    usage = ((entry.get("info") or {}).get("response_metrics") or {}).get("server_usage") or {}
    computed = entry.get("computed_metrics") or {}
    prompt = usage.get("prompt_tokens")
    cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0
    output = computed.get("output_tokens")
    output = usage.get("completion_tokens") if output is None else output
    ttft, latency = computed.get("time_to_first_token"), computed.get("request_latency")
    if prompt is None or output is None or ttft is None or latency is None:
        return None
    try:
        figures = (int(prompt), int(cached), int(output), float(ttft), float(latency))
    except (TypeError, ValueError):
        return None
    return figures if figures[3] >= 0 and figures[4] >= figures[3] else None


def _run_folders(run_dir: Path) -> list[Path]:
    """run_dir when it is a run, else every finished run below it (not .partial or replaced .old- folders)."""
    if (run_dir / PER_REQUEST_FILE).is_file():
        return [run_dir]
    return [
        p.parent
        for p in sorted(run_dir.rglob(PER_REQUEST_FILE))
        if not any(part.endswith(".partial") or ".old-" in part for part in p.parent.relative_to(run_dir).parts)
    ]


def _entries(path: Path) -> list[dict]:
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise SpecError(f"--calibrate: {path} is not readable JSON ({str(exc)[:80]}); {_FIX}") from None
    if not isinstance(document, list):
        raise SpecError(f"--calibrate: {path} is not inference-perf's list of requests; {_FIX}")
    return document


def _server(folders: list[Path]) -> str:
    """The server the runs were against, from the first run.json that names one ("" without)."""
    for folder in folders:
        if not (folder / RUN_FILE).is_file():
            continue
        record = read_run(folder) or {}
        server = (record.get("identity") or {}).get("server") or {}
        name = " ".join(str(server[k]) for k in ("engine", "version") if server.get(k)) or str(
            record.get("engine") or ""
        )
        capacity = server.get("kv_capacity_tokens")
        if name:
            return name + (f", KV cache {capacity:,} tokens" if isinstance(capacity, int) else "")
    return ""
