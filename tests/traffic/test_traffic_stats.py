"""The statistics people compare traffics by (traffic/stats.py) on hand-made requests whose every value is known: the
token and requests-per-session percentiles, the idle gaps and the share of the prompt the session sent before by idle
gap, the arrival rate; what a source cannot carry; and `fastgen workload stats A --against B` as a user types it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import run_fastgen
from fastgen.traffic import PUBLISHED, read_traffic, traffic_stats
from fastgen.traffic.read import Request
from fastgen.traffic.stats import comparison, comparison_table, fidelity_table, idle_gaps, unavailable, within

MIN = 60_000


def _request(session: str, start: float, end: float | None, tokens: tuple[int, int], own: int, **kw) -> Request:
    return Request(session=session, start_ms=start, end_ms=end, input_tokens=tokens[0], output_tokens=tokens[1],
                   tool_calls=kw.get("calls", 1), subagent=kw.get("subagent", False), reused=own, shared=0,
                   follows=None, own=own)  # fmt: skip


def _traffic(ends: bool = True) -> list[Request]:
    """Session a idles 30 s, 3 min, 7 min and 20 min between its five requests; in b a sub-agent starts while the
    main agent's first request runs (idle 0), and the next request starts 1 s after both ended."""
    a = [(0, (100, 10), 0), (31_000, (200, 20), 100), (212_000, (400, 40), 150), (633_000, (800, 80), 200),
         (1_834_000, (1600, 160), 160)]  # fmt: skip
    out = [_request("a", s, s + 1000 if ends else None, tokens, own) for s, tokens, own in a]
    out += [
        _request("b", 500, 2500 if ends else None, (1000, 100), 0),
        _request("b", 1500, 3000 if ends else None, (300, 30), 30, subagent=True),
        _request("b", 4000, 5000 if ends else None, (500, 50), 450),
    ]
    return sorted(out, key=lambda r: r.start_ms)


def test_token_and_session_percentiles_are_hazens():
    stats = traffic_stats(_traffic())
    # inputs 100 200 300 400 500 800 1000 1600: p10 at position 0.3, p90 at 6.7, p99 past the last
    assert [stats[f"input_p{p}"] for p in (10, 50, 90, 99)] == pytest.approx([130, 450, 1420, 1600])
    assert [stats[f"output_p{p}"] for p in (10, 50, 90, 99)] == pytest.approx([13, 45, 142, 160])
    # requests per session 3 (b, its sub-agent's too) and 5 (a); steps count b's main agent only
    assert [stats[f"requests_p{p}"] for p in (10, 50, 90, 99)] == [3, 4, 5, 5]
    assert stats["steps_p50"] == 3.5


def test_idle_gaps_start_at_the_sessions_last_end_and_bucket_the_prompt_it_sent():
    requests = _traffic()
    assert sorted(gap / 1000 for gap, _ in idle_gaps(requests)) == [0, 1, 30, 180, 420, 1200]
    stats = traffic_stats(requests)
    assert stats["idle_p50"] == pytest.approx(105) and stats["idle_p90"] == pytest.approx(1122)
    # < 1 min: a's 100 of 200, b's sub-agent 30 of 300 and b's last 450 of 500; then one request each
    assert stats["hit_under_1m"] == pytest.approx(58.0)
    assert (stats["hit_1_5m"], stats["hit_5_10m"], stats["hit_over_10m"]) == pytest.approx((37.5, 25.0, 10.0))


def test_arrival_rate_counts_every_minute_from_the_first_request():
    # minute 0: five requests; minutes 3, 10 and 30 one each; the 27 others none
    stats = traffic_stats(_traffic())
    assert stats["rate_mean"] == pytest.approx(8 / 31) and stats["rate_p90"] == 1 and stats["rate_peak"] == 5


def test_without_end_times_the_gaps_are_none_and_said_once():
    requests = _traffic(ends=False)
    stats = traffic_stats(requests)
    gapped = ("tool_p50", "tool_p90", "human_p50", "human_p90", "idle_p50", "idle_p90", "hit_under_1m", "hit_1_5m",
              "hit_5_10m", "hit_over_10m")  # fmt: skip
    assert {key for key, value in stats.items() if value is None} == set(gapped)
    assert stats["rate_peak"] == 5 and stats["input_p50"] == 450  # what starts and counts give, still given
    lines = unavailable(requests, stats)
    assert len(lines) == 1 and lines[0].startswith("- the traces have no end times")
    assert "tool latency, median; p90; human wait" in lines[0]


def test_an_empty_idle_bucket_is_none_with_its_reason():
    requests = [r for r in _traffic() if r.start_ms < 600_000]  # a's last two requests dropped
    stats = traffic_stats(requests)
    assert stats["hit_5_10m"] is None and stats["hit_over_10m"] is None and stats["hit_1_5m"] == 37.5
    assert unavailable(requests, stats) == [  # and no request here continues another (follows)
        "- no answer with tool calls is continued: tool latency, median; p90",
        "- no text answer is continued: human wait between requests, median; p90",
        "- no request follows an idle gap in that range: prompt the session sent before, idle gap 5-10 min; "
        "idle gap > 10 min",
    ]


def test_the_comparison_gives_the_difference_as_the_tolerance_holds_it():
    a, b = traffic_stats(_traffic()), traffic_stats(_traffic()[:-1])  # b without a's 20-min request
    compared = comparison(a, b)
    assert list(compared) == [s.key for s in PUBLISHED]
    assert compared["input_mean"]["difference"] == pytest.approx((4900 / 8) / (3300 / 7) - 1)
    assert compared["input_mean"]["within"] is False  # +30 % against ±10 %
    assert compared["hit_over_10m"] == {"what": "prompt the session sent before, idle gap > 10 min", "unit": "%",
                                        "traffic": 10.0, "against": None, "difference": None, "tolerance": 5.0,
                                        "within": None}  # fmt: skip
    table = comparison_table(a, b, traffic_name="A", against_name="B")
    assert "| input tokens per request, p10 | 130 | 120 | +8% | ±15% | yes |" in table
    assert "A: 2 sessions, 8 requests; B: 2 sessions, 7 requests" in table


def test_read_traffic_gives_the_prompt_tokens_the_session_itself_sent(tmp_path):
    lines = [
        {"timestamp": 0, "input_length": 1200, "output_length": 10, "hash_ids": [1, 2, 3], "session_id": "x"},
        {"timestamp": 500, "input_length": 1100, "output_length": 10, "hash_ids": [1, 7, 8], "session_id": "y"},
        {"timestamp": 900, "input_length": 1800, "output_length": 30, "hash_ids": [1, 2, 9, 10], "session_id": "x"},
    ]
    path = tmp_path / "t.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    requests = read_traffic([path])
    # y's block 1 was x's (shared, reused), not y's own; x's third request sent blocks 1 and 2 before
    assert [(r.reused, r.shared, r.own) for r in requests] == [(0, 0, 0), (512, 512, 0), (1024, 0, 1024)]


def _mooncake(path: Path) -> Path:
    """Two sessions, no end times: 3 requests, inputs 1000, 2000 and 3000 tokens, outputs 10, 20, 30."""
    lines = [
        {"timestamp": 0, "input_length": 1000, "output_length": 10, "hash_ids": [1, 2], "session_id": "x"},
        {"timestamp": 1000, "input_length": 2000, "output_length": 20, "hash_ids": [5, 6, 7, 8], "session_id": "y"},
        {"timestamp": 2000, "input_length": 3000, "output_length": 30, "hash_ids": [1, 2, 3, 4, 9, 11],
         "session_id": "x"},
    ]  # fmt: skip
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def test_cli_stats_against_prints_both_side_by_side_and_writes_the_comparison(small_dataset, tmp_path):
    traces, out = small_dataset / "traces", tmp_path / "compared.json"
    b = _mooncake(tmp_path / "b.jsonl")
    result = run_fastgen("workload", "stats", str(traces), "--against", str(b), "--json", str(out))
    assert result.returncode == 0, result.stderr
    assert f"| statistic | {traces} | {b} | difference | tolerance | within |" in result.stdout
    assert f"{b}: '-' where the traces have no end times" in result.stdout
    document = json.loads(out.read_text())
    assert list(document) == ["traffic", "against", "statistics"]
    assert document["against"] == {"paths": [str(b)], "sessions": 2, "requests": 3}
    assert document["traffic"]["sessions"] == len(list(traces.glob("*/session_*.json")))
    stats = document["statistics"]
    assert list(stats) == [s.key for s in PUBLISHED]
    assert stats["input_p50"]["against"] == 2000 and stats["output_p99"]["against"] == pytest.approx(30)
    assert stats["requests_p50"]["against"] == 1.5 and stats["rate_peak"]["against"] == 3
    assert stats["idle_p50"]["against"] is None and stats["idle_p50"]["within"] is None
    assert stats["idle_p50"]["traffic"] is not None
    mine = stats["input_p50"]
    assert mine["difference"] == pytest.approx(mine["traffic"] / 2000 - 1)
    assert mine["within"] == (abs(mine["difference"]) <= 0.10)
    assert f"| input tokens per request, median | {mine['traffic']:,.0f} | 2,000 |" in result.stdout


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda folder: folder / "missing", "missing does not exist"),
        (lambda folder: _written(folder / "b.jsonl", '{"what": 1}\n'), "b.jsonl: a .jsonl file in none of the forms"),
    ],
)
def test_cli_stats_against_an_unreadable_traffic_is_one_line_and_writes_nothing(small_dataset, tmp_path, make,
                                                                                  message):  # fmt: skip
    out = tmp_path / "compared.json"
    result = run_fastgen("workload", "stats", str(small_dataset / "traces"), "--against", str(make(tmp_path)),
                         "--json", str(out))  # fmt: skip
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("fastgen: error: ") and message in lines[0], lines
    assert not out.exists() and "| statistic |" not in result.stdout


def _written(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


# Today's statistics on a second hand-made set: sums, medians and gaps, None where the traffic does not say, the
# tolerance (points for a share, a fraction otherwise) and the table's marks.


def _simple(session: str, start_ms: float, **kw) -> Request:
    return Request(
        session=session,
        start_ms=start_ms,
        end_ms=kw.get("end_ms", start_ms + 1000),
        input_tokens=kw.get("input_tokens", 1000),
        output_tokens=kw.get("output_tokens", 100),
        tool_calls=kw.get("tool_calls", 1),
        subagent=kw.get("subagent", False),
        reused=kw.get("reused", 0),
        shared=kw.get("shared", 0),
        follows=kw.get("follows"),
    )


# session a: a tool call answered 2 s later, then a text answer the human read for 3 minutes; session b: one request
# and one sub-agent request (so half the sessions spawn one)
REQUESTS = [
    _simple("a", 0, input_tokens=1000, tool_calls=1),
    _simple("a", 3_000, input_tokens=2000, reused=1000, follows=0, tool_calls=0),
    _simple("a", 184_000, input_tokens=3000, reused=2000, follows=1, tool_calls=0),
    _simple("b", 0, input_tokens=1000, shared=500, reused=500, tool_calls=2),
    _simple("b", 10, input_tokens=1000, subagent=True, tool_calls=0),
]


def test_each_statistic_is_what_the_hand_made_requests_hold():
    stats = traffic_stats(REQUESTS)
    assert stats["sessions"] == 2 and stats["requests"] == 5
    assert stats["input_mean"] == 1600 and stats["input_p50"] == 1000
    assert stats["appended_mean"] == (8000 - 3500) / 5
    assert stats["cached_share"] == 100 * 3500 / 8000
    assert stats["cross_share"] == 100 * 500 / 8000
    assert stats["steps_p50"] == 2  # a's three and b's one main-agent steps; the sub-agent's not counted
    assert stats["calls_mean"] == 3 / 5
    assert stats["tool_p50"] == 2.0  # s: a's second request, 2 s after the first one's end
    assert stats["human_p50"] == 3.0  # min: a's third, 180 s after the text answer ended
    assert stats["subagent_share"] == 50.0


def test_traffic_without_tool_calls_or_ends_says_none_not_zero():
    mooncake = [
        _simple("a", 0, end_ms=None, tool_calls=None),
        _simple("a", 50, end_ms=None, tool_calls=None, follows=0),
    ]
    stats = traffic_stats(mooncake)
    assert stats["calls_mean"] is None and stats["tool_p50"] is None and stats["human_p90"] is None
    assert stats["output_mean"] == 100


def test_a_share_is_held_within_points_and_a_count_within_a_fraction():
    share = next(s for s in PUBLISHED if s.key == "cached_share")  # ±1.5 points
    count = next(s for s in PUBLISHED if s.key == "input_mean")  # ±10 %
    assert within(share, 97.4, 96.0) is True and within(share, 97.6, 96.0) is False
    assert within(count, 109.0, 100.0) is True and within(count, 111.0, 100.0) is False
    assert within(count, None, 100.0) is None


def test_the_table_marks_each_statistic_against_another_traffics():
    measured = traffic_stats(REQUESTS)
    table = fidelity_table(measured, measured, reference_name="the same")
    rows = table.splitlines()
    assert rows[0] == "| statistic | the same | measured | tolerance | within |"
    assert len([r for r in rows if r.endswith("| yes |")]) == sum(1 for s in PUBLISHED if measured[s.key] is not None)
    assert "| NO |" not in table and rows[-1] == "2 sessions, 5 requests (reference: 2 sessions)"
