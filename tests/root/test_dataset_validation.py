"""dataset_validation: validate handed the shapes of the dataset a folder or file is in."""

from __future__ import annotations

from pathlib import Path

import fastgen
from fastgen import dataset_validation
from fastgen.dataset_validation import shapes_of_file, shapes_of_tree
from fastgen.formats.manifest import MANIFEST_NAME, manifest_bytes
from fastgen.generator.expectations import expected_shapes
from fastgen.generator.workload import resolve_workload


def _agent_dataset(folder: Path) -> Path:
    folder.mkdir(parents=True)
    workload = resolve_workload("agent").to_dict()
    (folder / MANIFEST_NAME).write_bytes(manifest_bytes(files=[], tokenizer={}, workload=workload, arguments={}))
    return folder


def test_a_dataset_folder_and_its_trace_directories_take_the_manifests_shapes(tmp_path):
    traces = _agent_dataset(tmp_path / "traces")
    assert set(shapes_of_tree(traces)) == {"agent_loop"}
    assert shapes_of_tree(traces / "agent_loop") == shapes_of_tree(traces) == expected_shapes(traces)
    assert shapes_of_file(traces / "agent_loop" / "session_0000.json") == expected_shapes(traces)


def test_a_folder_outside_any_dataset_takes_the_default_workloads_shapes(tmp_path):
    assert shapes_of_tree(tmp_path) == expected_shapes()
    assert shapes_of_file(tmp_path / "scenario1" / "session_0000.json") == expected_shapes()


def test_the_package_door_validates_as_the_command_does():
    # fastgen.validate_tree(root) alone does what `fastgen validate ROOT` does: the shapes come with it
    assert fastgen.validate_tree is dataset_validation.validate_tree
    assert fastgen.check_file is dataset_validation.check_file
