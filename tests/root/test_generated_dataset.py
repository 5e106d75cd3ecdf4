"""The generated dataset through inference-perf itself: every graph has its scenario's shape, every config loads."""

from __future__ import annotations

from pathlib import Path

import pytest

from fastgen.formats.rows import trace_dir_of
from fastgen.dataset_validation import validate_tree


def test_every_generated_trace_builds_its_scenarios_graph_in_inference_perf(small_dataset):
    reports = validate_tree(small_dataset / "traces", workers=2)
    assert len(reports) == len(list((small_dataset / "traces").glob("scenario*/session_*.json")))
    assert [r for r in reports if r.deviations] == []


def test_every_generated_config_loads_and_its_paths_resolve_from_its_folder(small_dataset, monkeypatch):
    config = pytest.importorskip("inference_perf.config")
    transformers = pytest.importorskip("transformers")
    files = sorted((small_dataset / "configs").glob("*/*.yml"))
    assert len(files) == 17
    for path in files:
        monkeypatch.chdir(path.parent)  # inference-perf resolves paths from the working directory
        cfg = config.read_config(str(path))
        source = cfg.data.otel_trace_replay.hf_dataset_path
        assert source["path"] == "json" and Path(source["data_files"]).is_file(), path
        trace_dir = Path(trace_dir_of({"hf_dataset_path": source}))
        assert trace_dir.is_dir() and any(trace_dir.glob("session_*.json")), path
        assert Path(cfg.tokenizer.pretrained_model_name_or_path).is_dir()
        assert cfg.api.streaming and cfg.load.base_seed == 42
    tok = transformers.AutoTokenizer.from_pretrained(str(small_dataset / "traces" / "tokenizer"))
    assert tok.chat_template
