"""fastgen.formats.config_document: the inference-perf config document read and changed in one place, and the rule
that keeps it so (no module outside formats/ indexes the document's keys by hand)."""

from __future__ import annotations

import ast
import copy
from pathlib import Path

import pytest
import yaml

import fastgen
from fastgen.formats.config_document import ConfigDocument, local_storage

REPO = Path(fastgen.__file__).parent.parent
CONFIG = REPO / "configs" / "scenario1" / "c10.yml"  # a config fastgen wrote (the golden one, checked by its hash)

# Keys of the document's sections that only a reader of the document has a reason to name: a module that indexes one
# of these by hand reads the document around its reader. (The sections' own names, `load`, `server`, `data`,
# `tokenizer`, `storage`, name other documents' keys too: the run record's server, a manifest's tokenizer.)
DOCUMENT_KEYS = frozenset(
    {
        "otel_trace_replay",
        "hf_dataset_path",
        "trace_directory",
        "data_files",
        "stages",
        "base_seed",
        "num_workers",
        "local_storage",
        "google_cloud_storage",
        "simple_storage_service",
        "pretrained_model_name_or_path",
        "model_name",
        "base_url",
    }
)


def _document() -> ConfigDocument:
    return ConfigDocument(yaml.safe_load(CONFIG.read_text(encoding="utf-8")))


def test_the_view_reads_what_a_written_config_holds():
    doc = _document()
    assert doc.local_dataset_file == doc.dataset_files == "../../traces/scenario1.jsonl"
    assert doc.trace_directory is None and not doc.reads_trace_directory
    assert (doc.stage, doc.base_seed, doc.num_workers) == ({"concurrent_sessions": 10, "num_sessions": 100}, 42, 4)
    assert (doc.server_type, doc.model_name, doc.base_url) == (
        "vllm",
        "meta-llama/Llama-3.3-70B-Instruct",
        "http://localhost:8000",
    )
    assert doc.tokenizer_name == "../../traces/tokenizer"
    assert doc.local_report_path == "../../reports/vllm/scenario1/c10"
    assert doc.replay["tool_choice_mode"] == "force_recorded"


def test_a_document_without_a_section_raises_as_indexing_it_does():
    doc = ConfigDocument({"server": {"type": "vllm"}})
    for read in (lambda: doc.replay, lambda: doc.stage, lambda: doc.base_seed, lambda: doc.local_report_path):
        with pytest.raises(KeyError):
            read()
    assert (doc.base_url, doc.tokenizer_name, doc.storage) == (None, None, {})


def test_the_writers_change_the_document_in_place_keeping_its_keys_order():
    raw = yaml.safe_load(CONFIG.read_text(encoding="utf-8"))
    doc = ConfigDocument(raw)
    doc.read_dataset_file("scenario1.jsonl")
    doc.base_seed = 42001
    doc.tokenizer_name = "./tokenizer"
    doc.point_at("http://gpu:8000", "sglang")
    doc.local_report_path = "/reports/shard-01"
    assert doc.raw is raw and list(raw) == list(yaml.safe_load(CONFIG.read_text(encoding="utf-8")))
    assert raw["data"]["otel_trace_replay"]["hf_dataset_path"] == {"path": "json", "data_files": "scenario1.jsonl"}
    assert raw["load"]["base_seed"] == 42001 and raw["tokenizer"]["pretrained_model_name_or_path"] == "./tokenizer"
    assert raw["server"] == {
        "type": "sglang",
        "model_name": "meta-llama/Llama-3.3-70B-Instruct",
        "base_url": "http://gpu:8000",
        "ignore_eos": False,
    }
    assert raw["storage"] == local_storage("/reports/shard-01")


def test_reading_a_dataset_file_drops_the_trace_directory():
    doc = ConfigDocument({"data": {"otel_trace_replay": {"trace_directory": "../../traces/scenario1", "x": 1}}})
    assert doc.reads_trace_directory and doc.local_dataset_file is None
    doc.read_dataset_file("scenario1.jsonl")
    assert doc.replay == {"x": 1, "hf_dataset_path": {"path": "json", "data_files": "scenario1.jsonl"}}


def test_place_reports_gives_each_bucket_its_own_folder_and_keeps_the_other_keys():
    raw = {
        "storage": {
            "local_storage": {"path": "reports", "report_file_prefix": "r"},
            "google_cloud_storage": {"bucket_name": "b", "path": "runs/"},
            "simple_storage_service": {"bucket_name": "s"},
        }
    }
    before = copy.deepcopy(raw)
    ConfigDocument(raw).place_reports(".", "shard-03")
    assert raw["storage"] == {
        "local_storage": {"path": ".", "report_file_prefix": "r"},
        "google_cloud_storage": {"bucket_name": "b", "path": "runs/shard-03"},
        "simple_storage_service": {"bucket_name": "s", "path": "shard-03"},
    }
    assert before["storage"]["google_cloud_storage"]["path"] == "runs/"  # the sections were copied, not changed


def test_a_dumped_config_is_read_through_its_objects_dicts():
    # inference-perf's own dump of a run's config (its run-config.yml): data, replay and stage as objects' __dict__
    raw = {
        "data": {"__dict__": {"otel_trace_replay": {"__dict__": {"trace_directory": "t"}}}},
        "load": {"stages": [{"__dict__": {"concurrent_sessions": 5}}]},
    }
    doc = ConfigDocument(raw, dumped=True)
    assert (doc.replay, doc.stage) == ({"trace_directory": "t"}, {"concurrent_sessions": 5})
    with pytest.raises(KeyError):
        assert ConfigDocument(raw).replay  # a config as written is read as it is


def _hand_indexed(source: str) -> list[tuple[int, str]]:
    """(line, key) of each document key indexed by hand: x["key"], x.get/setdefault/pop("key"), "key" in x."""
    found = []
    for node in ast.walk(ast.parse(source)):
        key = None
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
            key = node.slice.value
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("get", "setdefault", "pop")
            and node.args
            and isinstance(node.args[0], ast.Constant)
        ):
            key = node.args[0].value
        elif isinstance(node, ast.Compare) and isinstance(node.left, ast.Constant):
            if any(isinstance(op, (ast.In, ast.NotIn)) for op in node.ops):
                key = node.left.value
        if key in DOCUMENT_KEYS:
            found.append((node.lineno, key))
    return sorted(found)


def test_no_module_outside_formats_indexes_the_config_document_by_hand():
    # the document's shape is named in formats/ only (config_document, and rows for its source keys); fastgen's
    # writer of a new config (generator/configs.py) builds it as a literal, which this rule leaves to it
    found = []
    for folder in ("fastgen", "e2e"):
        for path in sorted((REPO / folder).rglob("*.py")):
            if path.is_relative_to(REPO / "fastgen" / "formats"):
                continue
            found += [f"{path.relative_to(REPO)}:{line} {key}" for line, key in _hand_indexed(path.read_text())]
    assert found == []


def test_the_hand_indexing_rule_sees_each_way_of_indexing():
    source = """
replay = config["data"]["otel_trace_replay"]
seed = load.get("base_seed", 42)
storage.setdefault("local_storage", {})
if "trace_directory" in replay:
    pass
run["server"]["type"]
paths["tokenizer"]
"""
    assert _hand_indexed(source) == [
        (2, "otel_trace_replay"),
        (3, "base_seed"),
        (4, "local_storage"),
        (5, "trace_directory"),
    ]
