"""fastgen/traffic/stats.py on hand-made requests whose every statistic is known: the sums, medians and gaps, None
where the traffic does not say, the tolerance (points for a share, a fraction otherwise) and the table's marks."""

from __future__ import annotations

from fastgen.traffic.read import Request
from fastgen.traffic.stats import PUBLISHED, fidelity_table, traffic_stats, within


def _request(session: str, start_ms: float, **kw) -> Request:
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
    _request("a", 0, input_tokens=1000, tool_calls=1),
    _request("a", 3_000, input_tokens=2000, reused=1000, follows=0, tool_calls=0),
    _request("a", 184_000, input_tokens=3000, reused=2000, follows=1, tool_calls=0),
    _request("b", 0, input_tokens=1000, shared=500, reused=500, tool_calls=2),
    _request("b", 10, input_tokens=1000, subagent=True, tool_calls=0),
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
        _request("a", 0, end_ms=None, tool_calls=None),
        _request("a", 50, end_ms=None, tool_calls=None, follows=0),
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
