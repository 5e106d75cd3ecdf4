"""fastgen.traces.graph: inference-perf's graph builder as fastgen runs it."""

from __future__ import annotations

import copy
import json
import math
import random

import pytest

pytest.importorskip("inference_perf")

from fastgen.traces.graph import filter_duplicate_spans, graph_api  # noqa: E402


def _span(span_id, start=1, end=2, **attributes):
    return {"span_id": span_id, "start_time": start, "end_time": end, "attributes": attributes}


def test_filter_duplicate_spans_keeps_what_inference_perf_keeps():
    theirs = graph_api().filter_duplicate_spans
    history = json.dumps([{"role": "user", "content": "x" * 50}])
    spans = [
        _span("a", **{"gen_ai.input.messages": history, "n": 1}),
        _span("b", **{"n": 1, "gen_ai.input.messages": history}),  # the same attributes in another key order
        _span("c", start=5, **{"gen_ai.input.messages": history, "n": 1}),  # another start time
        _span("d", value=None),
        _span("e", value=math.nan),
        _span("f", value=math.nan),  # NaN is not null
        _span("g", value=1),
        _span("h", value=1.0),
        _span("i", value=True),  # nor 1 1.0 or true
        _span("j", big=2**70),
        _span("k", big=2**70),
        _span("l", big=2**71),  # past orjson's integers
        _span("m", start="1", value=None),  # a string start time that formats as the int one does
    ]
    rng = random.Random(3)
    for _ in range(20):
        order = copy.deepcopy(spans)
        rng.shuffle(order)
        want = [s["span_id"] for s in theirs(copy.deepcopy(order))]
        assert [s["span_id"] for s in filter_duplicate_spans(order)] == want
    assert set(want) == {"a", "c", "d", "e", "g", "h", "i", "j", "l"}  # the cases above do differ


def test_filter_duplicate_spans_on_a_generated_trace(small_dataset):
    from fastgen.traces.graph import read_trace

    folder = small_dataset
    theirs = graph_api().filter_duplicate_spans
    files = sorted(folder.glob("traces/scenario*/session_*.json"))
    assert files
    for path in files[:6]:
        spans = read_trace(path)["spans"]
        doubled = spans + copy.deepcopy(spans[:2])  # two exact duplicates, under the same span ids
        assert [s["span_id"] for s in filter_duplicate_spans(doubled)] == [
            s["span_id"] for s in theirs(copy.deepcopy(doubled))
        ]


def test_wire_tools_cleans_definitions_orjson_cannot_write_and_remembers_the_rest():
    from fastgen.traces.requests import wire_tools

    huge = [
        {
            "type": "function",
            "function": {
                "name": "f",
                "description": "d",
                "parameters": {"type": "object", "properties": {"n": {"type": "integer", "enum": [2**70]}}},
            },
        }
    ]
    cleaned = wire_tools(huge)
    assert cleaned[0]["function"]["name"] == "f"
    assert cleaned[0]["function"]["parameters"]["properties"]["n"]["enum"] == [2**70]
    plain = [{"type": "function", "function": {"name": "g", "parameters": {"type": "object", "properties": {}}}}]
    assert wire_tools(plain) is wire_tools(json.loads(json.dumps(plain)))
