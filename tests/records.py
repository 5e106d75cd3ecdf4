"""Request records built by hand for the results tests: every field a statistic reads, with defaults."""

from __future__ import annotations

from fastgen.results.runs import RequestRecord


def record(
    session="s",
    *,
    start=0.0,
    end=None,
    ttft=None,
    prompt=None,
    cached=None,
    output=10,
    failed=False,
    repeat=1,
    turn=1,
    kind="text",
    config="",
) -> RequestRecord:
    return RequestRecord(
        session=session,
        trace_dir="scenario1",
        turn=turn,
        kind=kind,
        start=start,
        end=start + 1.0 if end is None else end,
        prompt_tokens=prompt,
        cached_tokens=cached,
        output_tokens=output,
        ttft=ttft,
        latency=None,
        ntpot=None,
        tpot=None,
        failed=failed,
        repeat=repeat,
        config=config,
    )
