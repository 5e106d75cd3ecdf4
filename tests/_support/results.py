"""Helpers the results tests share: per-request records and run folders written as inference-perf and `fastgen bakeoff`
write them, request by request, so every figure has a hand-computed answer; and the report's tables read back."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

from fastgen.formats.run_record import RunRecord, write_run


def request(
    session,
    turn,
    kind,
    *,
    start,
    prompt,
    cached,
    ttft=0.1,
    trace_dir="scenario1",
    output=10,
    latency=0.5,
    details=True,
    error=None,
):
    usage = {
        "prompt_tokens": prompt,
        "completion_tokens": output,
        "prompt_tokens_details": {"cached_tokens": cached} if details else None,
    }
    return {
        "start_time": start,
        "end_time": start + latency,
        "info": {
            "labels": {"session": session, "trace_dir": trace_dir, "turn": str(turn), "turn_kind": kind},
            "response_metrics": {"output_tokens": output, "server_usage": usage},
        },
        "computed_metrics": None
        if error
        else {
            "request_latency": latency,
            "time_to_first_token": ttft if kind != "tool_call" else None,
            "normalized_time_per_output_token": latency / output,
            "time_per_output_token": None,
            "output_tokens": output,
        },
        "error": error,
    }


def write_folder(
    folder: Path, requests: list[dict], *, concurrency=2, engine="vllm", status="completed", samples=(), sessions=None
):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "per_request_lifecycle_metrics.json").write_text(json.dumps(requests))
    ids = sorted({r["info"]["labels"]["session"] for r in requests})
    sessions = (
        sessions
        if sessions is not None
        else [{"session_id": s, "success": True, "start_time": 1000.0, "end_time": 1036.0} for s in ids]
    )
    (folder / "per_session_lifecycle_metrics.json").write_text(json.dumps(sessions))
    (folder / "run-config.yml").write_text(
        f"load:\n  stages:\n  - concurrent_sessions: {concurrency}\n    num_sessions: {len(ids)}\n"
    )
    (folder / "metrics.jsonl").write_text(
        "".join(json.dumps({"t": 1000.0 + i, "metrics": m}) + "\n" for i, m in enumerate(samples))
    )
    write_run(folder, RunRecord(status=status, engine=engine, seconds=36.0))


def write_repeat(
    config: Path,
    requests: list[dict],
    *,
    repeat=1,
    repeats=1,
    status="completed",
    identity=None,
    counts=None,
    sessions=None,
    concurrency=2,
    samples=(),
    reset=None,
):
    """A repeat-K folder as fastgen bakeoff writes it: run.json format 2 (the run folder contract)."""
    folder = config / f"repeat-{repeat}"
    write_folder(folder, requests, concurrency=concurrency, samples=samples, sessions=sessions)
    ids = sorted({r["info"]["labels"]["session"] for r in requests})
    failed = sum(r["error"] is not None for r in requests)
    record = {
        "format": 2,
        "config": f"{config.parent.name}/{config.name}",
        "repeat": repeat,
        "repeats": repeats,
        "status": status,
        "reason": None if status == "completed" else "1 of 6 requests failed",
        "seconds": 36.0,
        "requests": {"expected": len(requests), "recorded": len(requests), "failed": failed},
        "sessions": {"total": len(ids), "failed": 0},
        "identity": identity or IDENTITY,
        "reset": reset or {"done": "POST /reset_prefix_cache", "verified": True, "how": "probe: 0 cached"},
    }
    if counts:
        record.update(counts)
    (folder / "run.json").write_text(json.dumps(record))
    return folder


IDENTITY = {
    "server": {
        "url": "http://a:8000",
        "engine": "vllm",
        "version": "0.11.0",
        "model": "m",
        "kv_capacity_tokens": 100_000,
        "block_size": 16,
        "gpus": None,
        "process_start": 1.0,
    },
    "dataset_sha256": "d" * 64,
    "config_sha256": "c" * 64,
    "outputs": "recorded",
    "tool_call_max_tokens": "recorded",
}


def identity(**changes) -> dict:
    server = {**IDENTITY["server"], **changes.pop("server", {})}
    return {**IDENTITY, **changes, "server": server}


def router_identity(policy: str, *capacities: Optional[int], engine: str = "vllm", block: int = 32) -> dict:
    """A run identity's router as the bakeoff records it (bakeoff/fleet.py's router_identity): one replica per
    capacity, each with its own server identity."""
    urls = [f"http://replica-{k}:8000" for k in range(len(capacities))]
    return {
        "url": "http://router:30000",
        "policy": policy,
        "policy_from": "--router-policy",
        "listed_by": "GET /workers",
        "replica_urls": urls,
        "replicas": [
            {"url": url, "engine": engine, "kv_capacity_tokens": capacity, "block_size": block}
            for url, capacity in zip(urls, capacities)
        ],
    }


def section(report: dict, id_: str) -> dict:
    return next(s for s in report["sections"] if s["id"] == id_)


def rows(table: dict) -> list[dict]:
    return [dict(zip(table["columns"], row)) for row in table["rows"]]


def table(report: dict, id_: str, title: str) -> list[dict]:
    return rows(next(t for t in section(report, id_)["tables"] if t["title"].startswith(title)))


def report_of(out: Path) -> dict:
    return json.loads((out / "report.json").read_text())


def scenario1_requests(cached_later: int) -> list[dict]:
    """Two sessions of three turns: turn 1 misses, later turns have `cached_later` of 1000 prompt tokens cached."""
    out = []
    for s, session in enumerate(("s1", "s2")):
        out.append(request(session, 1, "text", start=s, prompt=1000, cached=0, ttft=0.2, details=False))
        out.append(request(session, 2, "tool_call", start=s + 1, prompt=1000, cached=cached_later, latency=0.4))
        out.append(
            request(
                session,
                3,
                "text",
                start=s + 2,
                prompt=1000,
                cached=cached_later,
                ttft=0.05 if cached_later > 500 else 0.15,
            )
        )
    return out


def swarm_requests(ttfts_ms: list[float], *, output=10) -> list[dict]:
    return [
        request(f"s{i}", 1, "text", start=float(i), prompt=1000, cached=500, ttft=t / 1000, output=output)
        for i, t in enumerate(ttfts_ms)
    ]


def with_offset(requests: list[dict], offset: int) -> list[dict]:
    """The same requests rendered `offset` tokens longer, every one, those tokens cached where anything was."""
    for entry in requests:
        usage = entry["info"]["response_metrics"]["server_usage"]
        usage["prompt_tokens"] += offset
        details = usage.get("prompt_tokens_details")
        if details and details["cached_tokens"]:
            details["cached_tokens"] += offset
    return requests


def steady_requests() -> list[dict]:
    """Four sessions two at a time (s0 0-10, s1 1-11, s2 10-20, s3 11-21): the steady window is 1 to 11 s."""
    out = []
    for i, (start, end) in enumerate(((0, 10), (1, 11), (10, 20), (11, 21))):
        out.append(request(f"s{i}", 1, "text", start=start, prompt=1000, cached=0, latency=0.5, ttft=0.4))
        out.append(request(f"s{i}", 2, "text", start=end - 0.5, prompt=1000, cached=1000, latency=0.5, ttft=0.1))
    return out
