"""Property-based: over spec parameters and seeds, at small scale, every file is valid and exact."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fastgen.generator.dataset import DatasetBuilder, Task
from fastgen.generator.scenarios import default_spec
from fastgen.dataset_validation import check_file
from test_dataset import _output_tokens

pytest.importorskip("inference_perf")


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    seed=st.integers(0, 2**63 - 1),
    budgets=st.floats(0.01, 0.08),
    sessions=st.floats(0.01, 0.05),
    index=st.integers(0, 3),
    model=st.text(min_size=1, max_size=40),
)
def test_any_seed_and_small_spec_gives_valid_exact_files(
    builtin, rendered_prompt, tmp_path, seed, budgets, sessions, index, model
):
    spec = default_spec().scaled(sessions=sessions, budgets=budgets)
    builder = DatasetBuilder(builtin, spec, seed=seed, model=model)
    types = set()
    for task in (
        Task(1, index % spec.scenario1.sessions),
        Task(2, index % spec.scenario2.sets),
        Task(3, index % spec.scenario3.sessions),
    ):
        for rel, data in builder.files_for(task):
            path = tmp_path / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
            doc = json.loads(data)
            for span in doc["spans"]:
                a = span["attributes"]
                types.add(tuple(sorted((k, type(v).__name__) for k, v in a.items())))
                assert a["gen_ai.usage.input_tokens"] == rendered_prompt.tokens(a)
                assert a["gen_ai.usage.output_tokens"] == _output_tokens(
                    builtin, json.loads(a["gen_ai.output.messages"])
                )
            assert check_file(path).deviations == ()
    assert len(types) == 1
