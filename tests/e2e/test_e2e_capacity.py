"""The capacity search against the fake engine whose capacity is known by construction (its `slots`, `service_s`),
over real HTTP: N sessions, each streaming its next request as the last ends, TTFT taken at the first streamed
chunk, the step's TTFT p95 the report's own figure (results.inference.figure of TTFT[95]) judged by the SLO.

The load generator is this file's, not inference-perf: `fastgen bakeoff --capacity` driving inference-perf per
step is not built yet."""

from __future__ import annotations

import asyncio
import time

import aiohttp
import pytest

from _support import ROOT
from e2e.engines.fake_engine import EngineProfile
from e2e.engines.server import DEFAULT_MODEL, ServerThread
from fastgen.bakeoff.capacity_search import SLO, Measured, Outcome, Verdict, judge, search
from fastgen.results.runs import RequestRecord
from fastgen.results.inference import figure
from fastgen.results.sections.common import TTFT

TOKENIZER = ROOT / "fastgen" / "data" / "builtin-tokenizer"
BODY = {
    "model": DEFAULT_MODEL,
    "messages": [{"role": "user", "content": "Fix the failing test."}],
    "stream": True,
    "max_tokens": 4,
}


async def _session(url: str, name: str, requests: int, http: aiohttp.ClientSession) -> list[RequestRecord]:
    records = []
    for turn in range(requests):
        start = time.monotonic()
        ttft = None
        async with http.post(url, json=BODY) as response:
            failed = response.status != 200
            async for line in response.content:
                if ttft is None and line.startswith(b"data: "):
                    ttft = time.monotonic() - start
        end = time.monotonic()
        records.append(_record(name, turn, start=start, end=end, ttft=ttft, failed=failed))
    return records


def _record(name: str, turn: int, *, start: float, end: float, ttft: float | None, failed: bool) -> RequestRecord:
    return RequestRecord(
        session=name,
        trace_dir="",
        turn=turn,
        kind="text",
        start=start,
        end=end,
        prompt_tokens=None,
        cached_tokens=None,
        output_tokens=None,
        ttft=ttft,
        latency=end - start,
        ntpot=None,
        tpot=None,
        failed=failed,
        answered="text",
    )


async def _step(url: str, sessions: int, requests: int) -> list[RequestRecord]:
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as http:
        found = await asyncio.gather(*(_session(url, f"s{i}", requests, http) for i in range(sessions)))
    # steady state: each session's first request arrived while the others were still arriving, so it is not credited
    return [r for records in found for r in records if r.turn > 0]


def measurer(server: ServerThread, slo: SLO, *, requests: int):
    url = f"{server.base_url}/v1/chat/completions"

    def measure(load: float) -> Measured:
        began = time.monotonic()
        records = asyncio.run(_step(url, int(load), requests))
        p95 = figure([records], TTFT[95])
        failed = sum(r.failed for r in records)
        verdict = Verdict.FAILED if failed else judge(slo, {"ttft_p95_ms": p95})
        return Measured(
            verdict,
            {"ttft_p95_ms": p95.value or 0.0},
            seconds=time.monotonic() - began,
            failed=failed,
            requests=len(records),
        )

    return measure


def test_the_shared_server_makes_the_first_token_wait_its_share_past_its_width():
    with ServerThread(TOKENIZER, profile=EngineProfile(slots=4, service_s=0.05)) as server:
        url = f"{server.base_url}/v1/chat/completions"
        alone = asyncio.run(_step(url, 4, 3))
        crowded = asyncio.run(_step(url, 12, 3))
    assert all(r.ttft is not None and 0.05 <= r.ttft < 0.1 for r in alone)  # 4 in flight: the service time
    # 12 in flight, 4 wide: three times it (a session's last request may find others done: fewer in flight, less)
    waits = sorted(r.ttft or 0.0 for r in crowded)
    assert 0.15 <= waits[len(waits) // 2] and waits[-1] < 0.25, waits


@pytest.mark.slow
def test_the_search_brackets_the_fake_engines_known_capacity_within_its_width():
    # 4 wide, 0.3 s each: N sessions wait 0.3 * N / 4 s for the first token past N = 4; a TTFT p95 target of 1237.5
    # ms is met by N <= 16.5 sessions, so 16 meets (1200 ms) and 17 breaks (1275 ms), 37.5 ms either side of it
    slo, capacity, width = SLO(ttft_p95_ms=1237.5), 16.5, 0.10
    with ServerThread(TOKENIZER, profile=EngineProfile(slots=4, service_s=0.3)) as server:
        found = search(measurer(server, slo, requests=4), start=8, lowest=1, highest=64, width=width, repeats=1)
    line = found.line(slo)
    assert found.outcome is Outcome.BRACKETED, line
    assert found.lo is not None and found.hi is not None
    assert found.lo <= capacity < found.hi, line
    assert found.hi / found.lo - 1 <= width or found.hi == found.lo + 1, line
    assert found.seconds < 60, line
