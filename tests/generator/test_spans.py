from __future__ import annotations

import json

import pytest

from fastgen.generator.dataset import DatasetBuilder, Task
from fastgen.generator.native import native_session_bytes
from fastgen.generator.spans import iso_time, session_bytes
from fastgen.generator.scenarios import default_spec

HOSTILE_MODELS = ["meta-llama/Llama-3.3-70B-Instruct", 'q"uote\\back\nnew\tline', "ünï\u2028cødé\x01", "m" * 5000]


@pytest.fixture(scope="module")
def builder(builtin):
    return DatasetBuilder(builtin, default_spec().scaled(sessions=0.02, budgets=0.05), seed=42, model="m")


@pytest.mark.parametrize("model", HOSTILE_MODELS)
def test_spliced_bytes_equal_the_native_stdlib_json_oracle(builder, model):
    for task in (Task(1, 0), Task(2, 0), Task(3, 1)):
        for plan in builder.plans_for(task):
            spliced = session_bytes(plan, model=model, count=builder.count)
            assert spliced == native_session_bytes(plan, model=model, count=builder.count)
            doc = json.loads(spliced)
            assert doc["spans"][0]["name"] == f"chat {model}"
            assert isinstance(json.loads(doc["spans"][-1]["attributes"]["gen_ai.input.messages"]), list)


def test_iso_time_is_iso8601_utc_with_milliseconds():
    assert iso_time(0) == "2026-06-15T10:00:00.000Z"
    assert iso_time(86_400_000 + 1_234) == "2026-06-16T10:00:01.234Z"
