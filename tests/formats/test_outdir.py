"""Output folders on real filesystems: mount points (tmpfs, read-only), staging, placing outputs together or not at all."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
from pathlib import Path

import pytest

from conftest import SMALL, run_fastgen, trace_files
from fastgen.errors import OutputError
from fastgen.formats.manifest import manifest_bytes, record
from fastgen.formats.outdir import discard, open_staging, place_all


@contextlib.contextmanager
def tmpfs(where: Path, size: str = "64m", read_only: bool = False):
    """A real, small filesystem mounted at `where` for the test (the tests run as root)."""
    where.mkdir(parents=True, exist_ok=True)
    options = f"size={size}" + (",ro" if read_only else "")
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(where)], capture_output=True, text=True
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=True)


def _remount(where: Path, mode: str) -> None:
    subprocess.run(["mount", "-o", f"remount,{mode}", str(where)], check=True)


def _generate(out: Path, configs: Path, *extra: str):
    return run_fastgen(*SMALL, "--workers", "1", *extra, "--output-dir", str(out), "--config-dir", str(configs))


def _tree(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _one_error_line(result) -> str:
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("fastgen: error: "), lines[0]
    return lines[0]


def test_generate_into_a_mount_point_stages_on_it_and_replaces_the_previous_output(tmp_path):
    with tmpfs(tmp_path / "volume") as volume:
        first = _generate(volume, tmp_path / "configs", "--seed", "1")
        assert first.returncode == 0, first.stderr
        second = _generate(volume, tmp_path / "configs", "--seed", "2")
        assert second.returncode == 0, second.stderr

        assert json.loads((volume / "manifest.json").read_bytes())["arguments"]["seed"] == 2
        assert run_fastgen("verify", str(volume)).returncode == 0  # nothing missing, nothing extra
        assert not [p for p in volume.iterdir() if p.name.startswith(".")]  # no staging or trash folder inside
    # nothing was staged beside the mount point, on the parent's filesystem
    assert sorted(p.name for p in tmp_path.iterdir()) == ["configs", "volume"]


def test_generate_into_a_read_only_mount_point_fails_before_generating_and_keeps_the_dataset(tmp_path):
    with tmpfs(tmp_path / "volume") as volume:
        assert _generate(volume, tmp_path / "configs", "--seed", "1").returncode == 0
        before, configs_before = _tree(volume), _tree(tmp_path / "configs")
        _remount(volume, "ro")

        result = _generate(volume, tmp_path / "configs", "--seed", "2")

        assert result.returncode == 1
        line = _one_error_line(result)
        assert "Read-only file system" in line and str(volume) in line and "--output-dir" in line
        assert _tree(volume) == before
        assert _tree(tmp_path / "configs") == configs_before
        _remount(volume, "rw")
        assert run_fastgen("verify", str(volume)).returncode == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["configs", "volume"]


def test_generate_without_the_space_it_needs_says_how_much_before_writing(tmp_path):
    with tmpfs(tmp_path / "small", size="1m") as small:
        result = _generate(small / "traces", tmp_path / "configs")

        assert result.returncode == 1
        line = _one_error_line(result)
        assert "needs about" in line and "MB" in line and "free" in line and "--compress zstd" in line
        assert list(small.iterdir()) == []
    assert not (tmp_path / "configs").exists()


def _staged(out: Path, files: dict[str, bytes], **kwargs):
    staging = open_staging(out, **kwargs)
    for rel, data in files.items():
        (staging.folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (staging.folder / rel).write_bytes(data)
    (staging.folder / "manifest.json").write_bytes(
        manifest_bytes(
            files=[record(rel, data) for rel, data in files.items()], tokenizer={}, workload={}, arguments={}
        )
    )
    return staging


def test_place_all_undoes_the_first_output_when_the_second_cannot_be_placed(tmp_path):
    old = {"a/one.json": b"old one", "b/two.json": b"old two"}
    place_all([_staged(tmp_path / "traces", old)])
    place_all([_staged(tmp_path / "configs", {"c1.yml": b"old config"})])
    traces = _staged(tmp_path / "traces", {"a/one.json": b"new one", "c/three.json": b"new three"})
    configs = _staged(tmp_path / "configs", {"c1.yml": b"new config", "c2.yml": b"new"}, force=True)
    # a foreign file appears where the second output's new file goes, after both were staged
    (tmp_path / "configs" / "c2.yml").write_bytes(b"the user's own")

    with pytest.raises(OutputError, match="c2.yml is not fastgen's"):
        place_all([traces, configs])

    assert _tree(tmp_path / "traces") == {**old, "manifest.json": (tmp_path / "traces" / "manifest.json").read_bytes()}
    assert json.loads((tmp_path / "traces" / "manifest.json").read_bytes())["files"].keys() == old.keys()
    assert (tmp_path / "configs" / "c1.yml").read_bytes() == b"old config"
    assert (tmp_path / "configs" / "c2.yml").read_bytes() == b"the user's own"
    for staging in (traces, configs):
        discard(staging)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["configs", "traces"]


def test_open_staging_inside_a_mount_point_ignores_its_own_stale_staging(tmp_path):
    with tmpfs(tmp_path / "volume") as volume:
        stale = open_staging(volume)
        assert stale.folder.parent == volume  # staged on the mount itself
        (stale.folder / "half.json").write_bytes(b"{")  # a killed run's leftovers

        fresh = open_staging(volume)

        assert not stale.folder.exists() and fresh.folder.is_dir()
        discard(fresh)


def test_generate_output_and_config_folder_the_same_is_refused_up_front(tmp_path):
    result = _generate(tmp_path / "x", tmp_path / "x")

    assert result.returncode == 1
    assert "overlap" in _one_error_line(result)
    assert list(tmp_path.iterdir()) == []


def test_generate_config_dir_that_is_a_file_keeps_the_previous_traces(tmp_path):
    traces, configs = tmp_path / "traces", tmp_path / "configs"
    assert _generate(traces, configs, "--seed", "1").returncode == 0
    before = _tree(traces)
    blocker = tmp_path / "configs-file"
    blocker.write_bytes(b"not a folder\n")

    result = _generate(traces, blocker, "--seed", "2")

    assert result.returncode == 1
    assert str(blocker) in _one_error_line(result) and "--config-dir" in result.stderr
    assert _tree(traces) == before  # traces and configs still agree: both from seed 1
    assert blocker.read_bytes() == b"not a folder\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["configs", "configs-file", "traces"]


def test_generate_hand_edited_config_is_refused_and_force_never_overwrites_it(tmp_path):
    traces, configs = tmp_path / "traces", tmp_path / "configs"
    assert _generate(traces, configs, "--seed", "1").returncode == 0
    edited = configs / "scenario1" / "c25.yml"
    edited.write_text(edited.read_text() + "# my change\n")
    before, configs_before = _tree(traces), _tree(configs)

    refused = _generate(traces, configs, "--seed", "2")
    forced = _generate(traces, configs, "--seed", "2", "--force")

    assert refused.returncode == 1 and "scenario1/c25.yml" in _one_error_line(refused)
    assert "--force" in refused.stderr
    assert forced.returncode == 1 and "c25.yml is not fastgen's" in _one_error_line(forced)
    assert _tree(traces) == before and _tree(configs) == configs_before


def test_generate_unedited_configs_are_replaced_and_listed_in_their_manifest(tmp_path):
    traces, configs = tmp_path / "traces", tmp_path / "configs"
    assert _generate(traces, configs, "--seed", "1").returncode == 0
    mine = configs / "notes.txt"

    mine.write_bytes(b"my notes\n")
    refused = _generate(traces, configs, "--seed", "2")
    forced = _generate(traces, configs, "--seed", "2", "--force")

    assert refused.returncode == 1 and "notes.txt" in _one_error_line(refused)
    assert forced.returncode == 0, forced.stderr
    assert mine.read_bytes() == b"my notes\n"
    listed = json.loads((configs / "manifest.json").read_bytes())
    assert listed["arguments"]["seed"] == 2
    assert sorted(listed["files"]) == sorted(p.relative_to(configs).as_posix() for p in configs.rglob("*.yml"))
    assert "base_seed: 2" in (configs / "scenario1" / "c1.yml").read_text()
    assert len(trace_files(traces)) > 0
    os.remove(mine)
    assert run_fastgen("verify", str(configs)).returncode == 0


def test_force_never_replaces_a_manifest_json_fastgen_did_not_write(tmp_path):
    out = tmp_path / "t"
    out.mkdir()
    (out / "manifest.json").write_text('{"mine": true}')

    result = _generate(out, tmp_path / "configs", "--force")

    assert result.returncode == 1 and "manifest.json is not fastgen's" in _one_error_line(result)
    assert (out / "manifest.json").read_text() == '{"mine": true}'
    assert not (tmp_path / "configs").exists()


def test_an_output_folder_that_is_a_symlink_is_written_through_and_stays_a_link(tmp_path):
    (tmp_path / "real").mkdir()
    (tmp_path / "traces").symlink_to("real")
    for seed in ("1", "2"):
        assert _generate(tmp_path / "traces", tmp_path / "configs", "--seed", seed).returncode == 0

    assert (tmp_path / "traces").is_symlink()
    assert json.loads((tmp_path / "real" / "manifest.json").read_bytes())["arguments"]["seed"] == 2
    assert run_fastgen("verify", str(tmp_path / "real")).returncode == 0


def test_a_folder_or_link_of_the_users_inside_a_previous_output_is_refused(tmp_path):
    out = tmp_path / "t"
    assert _generate(out, tmp_path / "configs").returncode == 0
    (tmp_path / "keep").mkdir()
    (out / "my-notes").mkdir()
    (out / "link-to-keep").symlink_to(tmp_path / "keep")

    result = _generate(out, tmp_path / "configs", "--seed", "3")

    assert result.returncode == 1 and "link-to-keep" in _one_error_line(result)
    assert (out / "my-notes").is_dir() and (out / "link-to-keep").is_symlink()
