"""Throughput of every config both sides ran: completed sessions per hour and output tokens per second (per GPU-hour
where the runs recorded their GPUs), failures beside them; decode speed (TPOT, ITL) of the turns that stream text."""

from __future__ import annotations

from typing import Optional

from ..report import Cell, Pair, Section, Table
from ..stats import output_tokens_per_s, per_gpu_hour, percentile_ms, sessions_per_hour
from .common import TEXT_ANSWERS, abr, status_cell
from .steady import whole_output_tokens_per_s

TPOT, ITL = percentile_ms("tpot", 50), percentile_ms("itl", 50)

SCENARIO = None  # every scenario


def build(pair: Pair) -> Optional[Section]:
    names = sorted(
        set(pair.a.runs) & set(pair.b.runs), key=lambda n: (pair.a.runs[n].scenario, pair.a.runs[n].concurrency or 0, n)
    )
    if not names:
        return None
    gpus = any(r.server.get("gpus") for side in pair.sides for n in names for r in side.runs[n].repeats)
    per_gpu = [*abr("sessions/GPU-h"), *abr("output tok/GPU-h")] if gpus else []
    table = Table(
        "Throughput",
        [
            "config",
            "status",
            *abr("sessions/h"),
            *abr("output tok/s"),
            *per_gpu,
            "failed sessions A",
            "failed sessions B",
            "failed requests A",
            "failed requests B",
        ],
        note="sessions/h: completed sessions over the span from the first session's start to the last "
        "one's end (n: sessions); output tok/s: output tokens of successful requests over the span of all "
        "requests (n: requests). Per GPU-hour: divided by the GPUs the run recorded (fastgen bakeoff "
        "--gpus), empty where it recorded none. Mean over runs, its 95 % interval over runs between brackets; "
        "one run has none, and no B/A is tested.",
    )
    decode = Table(
        f"Decode speed of {TEXT_ANSWERS}",
        ["config", *abr("TPOT p50 ms"), *abr("ITL p50 ms")],
        note="TPOT: (last token time - first token time) / (output tokens - 1) per request; ITL: the mean "
        "gap between streamed chunks per request (inference-perf's inter_token_latency); an answer that is a "
        "tool call streams no content and has neither.",
    )
    for name in names:
        table.rows.append(_throughput_row(pair, name, gpus=gpus))
        decode.rows.append(
            [
                name,
                *pair.triple(TPOT, [name]),
                *pair.triple(ITL, [name]),
            ]
        )
    return Section("throughput", "Throughput", tables=[table, decode])


def _throughput_row(pair: Pair, name: str, *, gpus: bool) -> list[Cell]:
    row: list[Cell] = [
        name,
        status_cell(pair, name),
        *pair.run_triple(name, lambda r, _: sessions_per_hour(r), n=lambda r: len(r.sessions), what="sessions/h"),
        *pair.run_triple(name, whole_output_tokens_per_s, what="output tok/s"),
    ]
    if gpus:
        row += [
            *pair.run_triple(
                name,
                lambda r, _: per_gpu_hour(sessions_per_hour(r), r.server.get("gpus"), per_second=False),
                n=lambda r: len(r.sessions),
                what="sessions/GPU-h",
            ),
            *pair.run_triple(
                name,
                lambda r, _: per_gpu_hour(output_tokens_per_s(r.requests), r.server.get("gpus"), per_second=True),
                what="output tok/GPU-h",
            ),
        ]
    row += [
        pair.a.runs[name].sessions_failed,
        pair.b.runs[name].sessions_failed,
        pair.a.runs[name].requests_failed,
        pair.b.runs[name].requests_failed,
    ]
    return row
