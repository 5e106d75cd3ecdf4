"""generator.plan_from: a run's plan read back from a manifest, its tokenizer checked, and the lines said about it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fastgen.errors import SpecError
from fastgen.formats.tokenizer import load_tokenizer
from fastgen.generator.plan_from import (
    RunPlan,
    counting_line,
    load_planned_tokenizer,
    plan_from_manifest,
    tokenizer_warnings,
)
from fastgen.generator.workload import default_workload

from templates import without_template

DEFAULT = "meta-llama/Llama-3.3-70B-Instruct"


def _plan(**kw) -> RunPlan:
    given = {"spec": default_workload(), "model": DEFAULT, "tokenizer": "builtin", "revision": None, "seed": 1}
    return RunPlan(zstd_level=None, **{**given, **kw})


def test_plan_from_manifest_without_records_raises_naming_the_file(tmp_path: Path) -> None:
    path = tmp_path / "manifest.json"
    path.write_text(json.dumps({"generator": "fastgen", "files": {}}))
    with pytest.raises(SpecError, match=f"{path} records no workload, arguments or tokenizer"):
        plan_from_manifest(path)


def test_run_plan_count_of_an_old_manifest_is_content() -> None:
    assert _plan().count == "content" and _plan(arguments={"count": "template"}).count == "template"


def test_load_planned_tokenizer_other_sha256_raises(tmp_path: Path) -> None:
    plan = _plan(recorded={"sha256": "0" * 64}, manifest=tmp_path / "m.json")
    with pytest.raises(SpecError, match=f"tokenizer builtin is not the one {tmp_path / 'm.json'} was made with"):
        load_planned_tokenizer(plan)


def test_load_planned_tokenizer_count_template_without_one_raises(tmp_path: Path) -> None:
    plan = _plan(tokenizer=str(without_template(tmp_path / "plain")), arguments={"count": "template"})
    with pytest.raises(SpecError, match="--count template needs a chat template"):
        load_planned_tokenizer(plan)


def test_tokenizer_warnings_without_template_and_other_tokenizer_for_default_model(tmp_path: Path) -> None:
    name = str(without_template(tmp_path / "plain"))
    lines = tokenizer_warnings(
        load_tokenizer(name),
        model=DEFAULT,
        default_model=DEFAULT,
        model_given=False,
        tokenizer_name=name,
        server_type="vllm",
    )
    assert lines[0].startswith(f"--tokenizer {name} with the default --model {DEFAULT}")
    assert lines[1].startswith(f"tokenizer {name} has no chat template") and "\n" not in "".join(lines)


def test_tokenizer_warnings_builtin_for_default_model_is_quiet() -> None:
    lines = tokenizer_warnings(
        load_tokenizer("builtin"),
        model=DEFAULT,
        default_model=DEFAULT,
        model_given=False,
        tokenizer_name="builtin",
        server_type="vllm",
    )
    assert lines == []


def test_counting_line_content_names_the_assumed_templates() -> None:
    line = counting_line(load_tokenizer("builtin"), "content", "x/unknown")
    assert line.startswith("content tokens only: --count content") and "widest of the shipped templates" in line
