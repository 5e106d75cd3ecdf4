from __future__ import annotations

import json

import numpy as np

from fastgen.generator.tools import CORE_TOOLS, build_catalog


def test_build_catalog_fills_the_budget_in_flat_json_schema_form(builtin):
    catalog = build_catalog(builtin, repo="payments-ledger-core", budget=8000, rng=np.random.default_rng(1))
    assert 7800 <= catalog.tokens <= 8000
    assert catalog.tokens == builtin.count(catalog.json)
    tools = json.loads(catalog.json)
    assert [t["name"] for t in tools[: len(CORE_TOOLS)]] == list(CORE_TOOLS)
    assert len({t["name"] for t in tools}) == len(tools)
    for tool in tools:
        assert set(tool) == {"type", "name", "description", "parameters"} and tool["type"] == "function"
        assert tool["parameters"]["type"] == "object"
        assert set(tool["parameters"]["required"]) <= set(tool["parameters"]["properties"])


def test_build_catalog_small_budget_keeps_the_core_tools(builtin):
    catalog = build_catalog(builtin, repo="r", budget=10, rng=np.random.default_rng(1))
    assert catalog.names == CORE_TOOLS


def test_build_catalog_depends_on_repo_and_seed(builtin):
    a = build_catalog(builtin, repo="a-repo", budget=2000, rng=np.random.default_rng(1))
    b = build_catalog(builtin, repo="b-repo", budget=2000, rng=np.random.default_rng(1))
    c = build_catalog(builtin, repo="a-repo", budget=2000, rng=np.random.default_rng(2))
    assert a.json != b.json and a.json != c.json
    assert a == build_catalog(builtin, repo="a-repo", budget=2000, rng=np.random.default_rng(1))
