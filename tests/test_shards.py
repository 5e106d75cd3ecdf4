"""export/shards.py: one config's replay split into disjoint shards; real generated datasets, inference-perf's own
config model."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from fastgen.errors import OutputError, SpecError
from fastgen.export.shards import plan_shards, write_shards
from fastgen.generator.rows import replay_slots

CONFIG = "configs/scenario3/c100_stable.yml"  # 20 sessions at the small scale


def _rows(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines(keepends=True)


def test_plan_shards_slots_are_disjoint_and_their_union_is_the_configs_replay(small_dataset):
    config = small_dataset / CONFIG
    document = yaml.safe_load(config.read_text())
    stage = document["load"]["stages"][0]
    single = replay_slots(20, document["load"]["base_seed"], stage["num_sessions"])
    shards = plan_shards(config, 3)
    assert [s.index for s in shards] == [0, 1, 2] and {s.count for s in shards} == {3}
    together = [slot for s in shards for slot in s.slots]
    assert len(together) == len(set(together)) == stage["num_sessions"]
    assert sorted(together) == sorted(single)
    assert [s.slots for s in shards] == [tuple(single[k::3]) for k in range(3)]  # round-robin in slot order


def test_plan_shards_configs_share_the_load_and_keep_their_own_seed_and_reports(small_dataset):
    config = small_dataset / CONFIG
    document = yaml.safe_load(config.read_text())
    stage = document["load"]["stages"][0]
    shards = plan_shards(config, 3)
    rates = [s.config["load"]["stages"][0]["session_rate"] for s in shards]
    assert sum(rates) == pytest.approx(stage["session_rate"])
    assert [s.config["load"]["stages"][0]["num_sessions"] for s in shards] == [len(s.slots) for s in shards]
    assert len({s.config["load"]["base_seed"] for s in shards}) == 3
    paths = [s.config["storage"]["local_storage"]["path"] for s in shards]
    assert len(set(paths)) == 3 and all(p.endswith(f"shard-{k:02d}") for k, p in enumerate(paths))
    for shard in shards:
        assert shard.config["load"]["stages"][0]["concurrent_sessions"] >= 1
        assert Path(shard.config["tokenizer"]["pretrained_model_name_or_path"]).is_absolute()


def test_plan_shards_gives_every_remote_report_path_a_shard_suffix(tmp_path, small_dataset):
    config = tmp_path / "configs" / "scenario3" / "c.yml"
    shutil.copytree(small_dataset / "traces", tmp_path / "traces")
    config.parent.mkdir(parents=True)
    document = yaml.safe_load((small_dataset / CONFIG).read_text())
    document["storage"]["google_cloud_storage"] = {"bucket_name": "b", "path": "runs/c100/"}
    document["storage"]["simple_storage_service"] = {"bucket_name": "b"}
    config.write_text(yaml.safe_dump(document))
    shards = plan_shards(config, 2)
    assert [s.config["storage"]["google_cloud_storage"]["path"] for s in shards] == [
        "runs/c100/shard-00",
        "runs/c100/shard-01",
    ]
    assert [s.config["storage"]["simple_storage_service"]["path"] for s in shards] == ["shard-00", "shard-01"]


def test_write_shards_files_hold_exactly_each_shards_rows_byte_for_byte(tmp_path, small_dataset):
    config = small_dataset / CONFIG
    source = _rows(small_dataset / "traces" / "scenario3_stable.jsonl")
    shards = plan_shards(config, 3)
    paths = write_shards(config, 3, tmp_path / "out")
    assert paths == [tmp_path / "out" / f"shard-{k:02d}" / "c100_stable.yml" for k in range(3)]
    for shard, path in zip(shards, paths):
        rows = _rows(path.parent / "scenario3_stable.jsonl")
        assert sorted(rows) == sorted(source[i] for i in shard.slots)
        # the shard's own shuffle starts its sessions in the single config's slot order
        order = replay_slots(len(rows), shard.config["load"]["base_seed"], len(rows))
        assert [rows[r] for r in order] == [source[i] for i in shard.slots]
        assert yaml.safe_load(path.read_text()) == shard.config
    listed = json.loads((tmp_path / "out" / "manifest.json").read_text())["files"]
    assert sorted(listed) == sorted(
        f"shard-{k:02d}/{name}" for k in range(3) for name in ("c100_stable.yml", "scenario3_stable.jsonl")
    )


def test_write_shards_from_a_trace_directory_writes_the_rows_the_dataset_file_holds(tmp_path, small_dataset):
    config = tmp_path / "c.yml"
    document = yaml.safe_load((small_dataset / CONFIG).read_text())
    replay = document["data"]["otel_trace_replay"]
    replay.pop("hf_dataset_path")
    replay["trace_directory"] = str(small_dataset / "traces" / "scenario3_stable")
    config.write_text(yaml.safe_dump(document))
    from_dir = write_shards(config, 2, tmp_path / "from-dir")
    from_file = write_shards(small_dataset / CONFIG, 2, tmp_path / "from-file")
    for a, b in zip(from_dir, from_file):
        assert (a.parent / "scenario3_stable.jsonl").read_bytes() == (b.parent / "scenario3_stable.jsonl").read_bytes()


def test_shard_configs_load_in_inference_perfs_config_model(tmp_path, small_dataset):
    from inference_perf.config import read_config

    for path in write_shards(small_dataset / CONFIG, 2, tmp_path / "out"):
        config = read_config(str(path))
        assert config.load.stages[0].num_sessions == 10
        assert config.data.otel_trace_replay.hf_dataset_path == {"path": "json", "data_files": "scenario3_stable.jsonl"}


@pytest.mark.parametrize("count", [0, -1, 21])
def test_plan_shards_refuses_a_count_outside_one_to_the_sessions(small_dataset, count):
    with pytest.raises(SpecError, match="--shards"):
        plan_shards(small_dataset / CONFIG, count)


def test_write_shards_refuses_a_dataset_file_the_manifest_does_not_list_and_writes_nothing(tmp_path, small_dataset):
    shutil.copytree(small_dataset / "traces", tmp_path / "traces")
    shutil.copytree(small_dataset / "configs", tmp_path / "configs")
    dataset = tmp_path / "traces" / "scenario3_stable.jsonl"
    dataset.write_bytes(dataset.read_bytes().replace(b'"session_id"', b'"session_iD"', 1))
    with pytest.raises(OutputError, match="hash differs"):
        write_shards(tmp_path / CONFIG, 2, tmp_path / "out")
    assert not (tmp_path / "out").exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no staging folder left


def test_write_shards_replaces_an_earlier_export_and_refuses_a_folder_of_other_files(tmp_path, small_dataset):
    out = tmp_path / "out"
    write_shards(small_dataset / CONFIG, 3, out)
    write_shards(small_dataset / CONFIG, 2, out)
    assert sorted(p.name for p in out.iterdir()) == ["manifest.json", "shard-00", "shard-01"]
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep")
    with pytest.raises(OutputError, match="--out"):
        write_shards(small_dataset / CONFIG, 2, mine)
    assert sorted(p.name for p in mine.iterdir()) == ["notes.txt"]
