"""verify, unpack and zstd output, through the real command on real files."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
from collections import namedtuple

import pytest
import zstandard

from conftest import SMALL, run_fastgen
from fastgen import verify
from fastgen.formats import writer
from fastgen.formats.compression import read_trace_bytes
from fastgen.errors import OutputError
from fastgen.formats.manifest import HASH_NAME, listed_record, record
from fastgen.dataset_validation import check_file


@pytest.fixture(scope="module")
def packed(tmp_path_factory):
    root = tmp_path_factory.mktemp("packed")
    result = run_fastgen(
        *SMALL,
        "--workers",
        "2",
        "--compress",
        "zstd",
        "--level",
        "3",
        "--output-dir",
        str(root / "traces"),
        "--config-dir",
        str(root / "configs"),
    )
    assert result.returncode == 0, result.stderr
    return root / "traces"


def _copy(src, tmp_path):
    dst = tmp_path / "traces"
    shutil.copytree(src, dst)
    return dst


def _snapshot(root):
    """Every file under root and its bytes: "nothing changed" means this is equal before and after."""
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _packed_files(traces):
    return sorted(traces.glob("scenario*/session_*.json.zst"))


def _plain_of(path):
    return path.with_name(path.name[: -len(".zst")])


def _one_line_error(result):
    assert result.returncode == 1, result.stdout + result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("fastgen: error: "), result.stderr
    return lines[0]


def test_compressed_files_restore_to_the_plain_bytes(packed, small_dataset):
    plain = small_dataset / "traces"
    zst = sorted(packed.glob("scenario*/session_*.json.zst"))
    assert zst and not list(packed.glob("scenario*/session_*.json"))
    for path in zst:
        rel = path.relative_to(packed).as_posix()[: -len(".zst")]
        assert read_trace_bytes(path) == (plain / rel).read_bytes()


@pytest.mark.skipif(shutil.which("zstd") is None, reason="the zstd command is not installed")
def test_standard_zstd_command_decompresses_a_file_on_its_own(packed, tmp_path):
    source = next(packed.glob("scenario1/*.json.zst"))
    subprocess.run(["zstd", "-d", "-q", str(source), "-o", str(tmp_path / "out.json")], check=True)
    assert json.loads((tmp_path / "out.json").read_bytes())["spans"]


def test_read_trace_bytes_reads_every_frame_of_a_multi_frame_file(tmp_path):
    c = zstandard.ZstdCompressor()
    path = tmp_path / "session_0000.json.zst"
    path.write_bytes(c.compress(b'{"spans": [') + c.compress(b"]}"))
    assert read_trace_bytes(path) == b'{"spans": []}'


def test_verify_clean_dataset_exits_0(packed):
    result = run_fastgen("verify", str(packed))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 missing, 0 extra, 0 changed" in result.stdout


def test_verify_catches_flipped_byte_truncation_missing_and_extra_files(small_dataset, tmp_path):
    traces = _copy(small_dataset / "traces", tmp_path)
    files = sorted(traces.glob("scenario*/session_*.json"))
    data = bytearray(files[0].read_bytes())
    data[len(data) // 2] ^= 0x01
    files[0].write_bytes(bytes(data))
    files[1].write_bytes(files[1].read_bytes()[:-10])
    files[2].unlink()
    (traces / "scenario1" / "stray.json").write_text("{}")

    result = run_fastgen("verify", str(traces))

    assert result.returncode == 1
    out = result.stdout
    assert "1 missing, 1 extra, 1 changed, 1 truncated" in out
    for heading, path in (("changed", files[0]), ("truncated", files[1]), ("missing", files[2])):
        assert f"  {heading}: {path.relative_to(traces).as_posix()}" in out
    assert "  extra: scenario1/stray.json" in out


def test_verify_manifest_that_does_not_parse_is_one_line_and_nonzero(small_dataset, tmp_path):
    traces = _copy(small_dataset / "traces", tmp_path)
    (traces / "manifest.json").write_text('{"generator": "fastgen", "files": ')
    result = run_fastgen("verify", str(traces))
    assert result.returncode == 1
    assert len(result.stderr.splitlines()) == 1 and "manifest.json" in result.stderr


def test_verify_manifest_from_before_xxh3_is_named_as_such(small_dataset, tmp_path):
    traces = _copy(small_dataset / "traces", tmp_path)
    doc = json.loads((traces / "manifest.json").read_bytes())
    doc["files"] = {rel: {"size": e["size"], "sha256": "0" * 64} for rel, e in doc["files"].items()}
    (traces / "manifest.json").write_text(json.dumps(doc))
    for command in ("verify", "unpack"):
        result = run_fastgen(command, str(traces))
        assert result.returncode == 1
        assert len(result.stderr.splitlines()) == 1, result.stderr
        assert "before 0.2" in result.stderr and "regenerate" in result.stderr


def test_listed_record_entry_without_size_raises_output_error(tmp_path):
    # it was a record of size None, which verify then compared with a file's size: a TypeError, not one line
    with pytest.raises(OutputError, match="scenario1/a.json without its size"):
        listed_record("scenario1/a.json", {HASH_NAME: "0" * 32}, tmp_path / "manifest.json")


def test_record_hash_is_xxh3_128_as_xxh128sum_prints_it(tmp_path):
    # XXH3-128 of the empty input, from xxHash's own test vectors; then a chunked record equals a whole one.
    assert record("empty").digest == "99aa06d3014798d86001c324468d497f"
    data = bytes(range(256)) * 4099
    assert record("a", data[:1000], data[1000:]) == record("a", data)
    if shutil.which("xxh128sum"):
        (tmp_path / "f").write_bytes(data)
        out = subprocess.run(["xxh128sum", str(tmp_path / "f")], check=True, capture_output=True, text=True).stdout
        assert out.split()[0] == record("f", data).digest


def test_unpack_restores_plain_json_that_verifies_against_a_plain_run(packed, small_dataset, tmp_path):
    traces = _copy(packed, tmp_path)
    result = run_fastgen("unpack", str(traces))
    assert result.returncode == 0, result.stderr
    assert not list(traces.rglob("*.json.zst"))
    check = run_fastgen("verify", str(traces), "--manifest", str(small_dataset / "traces" / "manifest.json"))
    assert check.returncode == 0, check.stdout
    assert run_fastgen("verify", str(traces)).returncode == 0


def test_validate_reads_compressed_traces(packed):
    result = run_fastgen("validate", str(packed), "--workers", "1")
    assert result.returncode == 0, result.stdout + result.stderr
    total = next(line for line in result.stdout.splitlines() if line.startswith("total")).split()
    assert total[-1] == "0" and int(total[1]) == len(list(packed.glob("scenario*/*.zst")))


# unpack: all or nothing, and a rerun finishes what a killed run left


@pytest.mark.parametrize("damage", ["flip", "truncate", "remove"])
def test_unpack_checks_every_file_first_and_a_bad_one_changes_nothing(packed, tmp_path, damage):
    traces = _copy(packed, tmp_path)
    victim = _packed_files(traces)[len(_packed_files(traces)) // 2]  # files before it would be restored by now
    data = bytearray(victim.read_bytes())
    if damage == "flip":
        data[len(data) // 2] ^= 0x01
        victim.write_bytes(bytes(data))
    elif damage == "truncate":
        victim.write_bytes(bytes(data[:-20]))
    else:
        victim.unlink()
    before = _snapshot(traces)

    line = _one_line_error(run_fastgen("unpack", str(traces)))

    assert str(victim) in line and "unpack changed nothing" in line and "regenerate" in line
    assert {"flip": "does not match", "truncate": "truncated", "remove": "missing"}[damage] in line
    assert _snapshot(traces) == before
    assert run_fastgen("verify", str(traces)).returncode == 1  # still the packed dataset, still with its damage


def test_unpack_interrupted_while_writing_leaves_the_folder_as_it_was(packed, tmp_path, monkeypatch):
    traces = _copy(packed, tmp_path)
    before = _snapshot(traces)
    real, calls = writer._VectoredWrites.write_all, []

    def interrupted(self, fd, chunks):
        calls.append(fd)
        real(self, fd, chunks)
        if len(calls) == 3:  # the third file is half done: Ctrl-C
            raise KeyboardInterrupt

    monkeypatch.setattr(writer._VectoredWrites, "write_all", interrupted)
    with pytest.raises(KeyboardInterrupt):
        verify.unpack_tree(traces)
    assert _snapshot(traces) == before


def test_unpack_holds_back_ctrl_c_while_putting_the_files_in_place(packed, tmp_path, monkeypatch):
    traces = _copy(packed, tmp_path)
    real, sent = os.replace, []

    def replace_and_interrupt(src, dst):
        if not sent and str(dst).endswith(".json"):  # the first .json renamed into place: Ctrl-C comes now
            sent.append(dst)
            signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)
        real(src, dst)

    monkeypatch.setattr(os, "replace", replace_and_interrupt)
    try:
        restored = verify.unpack_tree(traces)  # no KeyboardInterrupt: the run finished, the signal is dropped
    except KeyboardInterrupt:
        pytest.fail("Ctrl-C stopped unpack halfway through putting the files in place")
    assert sent and restored == len(_packed_files(packed))
    assert not list(traces.rglob("*.json.zst")) and not list(traces.rglob("*.part"))
    assert run_fastgen("verify", str(traces)).returncode == 0


def test_unpack_rerun_after_a_kill_before_the_manifest_keeps_what_was_renamed_in(packed, small_dataset, tmp_path):
    # What a kill -9 between the renames and the manifest rewrite leaves: some .json in place beside their .zst,
    # another one's temporary file half written, and a half-written manifest temporary.
    traces = _copy(packed, tmp_path)
    zst = _packed_files(traces)
    for path in zst[:3]:
        _plain_of(path).write_bytes(read_trace_bytes(path))
    kept = {path: _plain_of(path).stat().st_ino for path in zst[:3]}
    (zst[3].parent / (_plain_of(zst[3]).name + ".part")).write_bytes(b'{"spans": [')
    (traces / "manifest.json.part").write_bytes(b'{"gener')

    result = run_fastgen("unpack", str(traces))

    assert result.returncode == 0, result.stderr
    assert f"restored {len(zst)} .json files" in result.stdout
    assert all(_plain_of(path).stat().st_ino == ino for path, ino in kept.items())  # kept, not written again
    assert not list(traces.rglob("*.json.zst")) and not list(traces.rglob("*.part"))
    assert run_fastgen("verify", str(traces)).returncode == 0
    assert (
        run_fastgen("verify", str(traces), "--manifest", str(small_dataset / "traces" / "manifest.json")).returncode
        == 0
    )


def test_unpack_rerun_after_a_kill_before_the_zst_were_removed_removes_them(packed, tmp_path):
    traces = _copy(packed, tmp_path)
    assert run_fastgen("unpack", str(traces)).returncode == 0
    left = _packed_files(packed)[:4]
    for path in left:  # the manifest lists the .json, these .json.zst were not removed yet
        shutil.copy2(path, traces / path.relative_to(packed))
    foreign = traces / "scenario1" / "notes.json.zst"  # not the .zst of a listed file: not unpack's to remove
    foreign.write_bytes(zstandard.ZstdCompressor().compress(b"{}"))

    result = run_fastgen("unpack", str(traces))

    assert result.returncode == 0, result.stderr
    assert sorted(traces.rglob("*.json.zst")) == [foreign]
    foreign.unlink()
    assert run_fastgen("verify", str(traces)).returncode == 0


def test_unpack_rerun_takes_a_json_already_restored_without_its_zst(packed, tmp_path):
    # A file restored and its .zst removed while the manifest still lists the .zst (an unpack by an older fastgen
    # killed mid-way, or `zstd -d --rm` by hand): its .json is checked against the content record and kept.
    traces = _copy(packed, tmp_path)
    first = _packed_files(traces)[0]
    _plain_of(first).write_bytes(read_trace_bytes(first))
    first.unlink()
    result = run_fastgen("unpack", str(traces))
    assert result.returncode == 0, result.stderr
    assert not list(traces.rglob("*.json.zst"))
    assert run_fastgen("verify", str(traces)).returncode == 0


def test_unpack_refuses_up_front_when_the_disk_has_no_room(packed, tmp_path, monkeypatch):
    traces = _copy(packed, tmp_path)
    before = _snapshot(traces)
    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(shutil, "disk_usage", lambda path: usage(10**9, 10**9 - 4096, 4096))
    with pytest.raises(OutputError, match=r"unpack needs about [\d.]+ MB, 0.0 MB free in .*; free space") as exc:
        verify.unpack_tree(traces)
    assert "\n" not in str(exc.value) and str(traces) in str(exc.value)
    assert _snapshot(traces) == before


def test_unpack_writes_plain_records_equal_to_the_content_records(packed, tmp_path):
    traces = _copy(packed, tmp_path)
    packed_files = json.loads((packed / "manifest.json").read_bytes())["files"]
    assert verify.unpack_tree(traces) == len(_packed_files(packed))
    files = json.loads((traces / "manifest.json").read_bytes())["files"]
    for rel, entry in packed_files.items():
        if rel.endswith(".json.zst"):  # a dataset file (.jsonl.zst) stays as it is: datasets reads it
            assert files[rel[: -len(".zst")]] == entry["content"]
        else:
            assert files[rel] == entry
    assert len(files) == len(packed_files)


# One-line errors that name the given path and the fix


def test_verify_and_unpack_given_a_file_say_to_give_the_dataset_folder(small_dataset):
    manifest = small_dataset / "traces" / "manifest.json"
    line = _one_line_error(run_fastgen("verify", str(manifest)))
    assert f"{manifest} is a file, not a dataset folder" in line and "--manifest FILE" in line
    line = _one_line_error(run_fastgen("unpack", str(manifest)))
    assert f"{manifest} is a file, not a dataset folder" in line and "fastgen unpack DIR" in line


@pytest.mark.parametrize("given", ["nonexistent", "readme", "other-json", "folder"])
def test_verify_manifest_option_errors_are_about_the_given_file(small_dataset, tmp_path, given):
    path = {
        "nonexistent": tmp_path / "nonexistent.json",
        "readme": tmp_path / "README.md",
        "other-json": tmp_path / "other.json",
        "folder": tmp_path,
    }[given]
    if given == "readme":
        path.write_text("# fastgen\n\nGenerates traces.\n")
    elif given == "other-json":
        path.write_text(json.dumps({"files": {}, "generator": "someone else"}))
    line = _one_line_error(run_fastgen("verify", str(small_dataset / "traces"), "--manifest", str(path)))
    assert str(path) in line and "golden manifest" in line
    assert "regenerate" not in line and "fastgen output" not in line
    want = {
        "nonexistent": "does not exist",
        "readme": "is not a fastgen manifest (not JSON",
        "other-json": "is not a fastgen manifest",
        "folder": "is a folder",
    }[given]
    assert want in line


def test_dataset_folder_without_its_manifest_still_says_so(small_dataset, tmp_path):
    traces = _copy(small_dataset / "traces", tmp_path)
    (traces / "manifest.json").unlink()
    for command in ("verify", "unpack"):
        line = _one_line_error(run_fastgen(command, str(traces)))
        assert "manifest.json does not exist" in line and "fastgen output" in line


# Truncated and corrupt .json.zst


def _zst(tmp_path, data: bytes):
    path = tmp_path / "scenario1" / "session_0000.json.zst"
    path.parent.mkdir(exist_ok=True)
    path.write_bytes(zstandard.ZstdCompressor(write_checksum=True, write_content_size=True).compress(data))
    return path


@pytest.mark.parametrize("keep", [0, 3, 12, "half", -4, -1])
def test_read_trace_bytes_refuses_a_truncated_file(tmp_path, keep):
    path = _zst(tmp_path, json.dumps({"spans": [{"n": i} for i in range(2000)]}).encode())
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2 if keep == "half" else keep % len(data) if keep else 0])
    with pytest.raises(OutputError, match="is truncated or corrupt") as exc:
        read_trace_bytes(path)
    assert exc.value.truncated and str(path) in str(exc.value) and "\n" not in str(exc.value)


def test_read_trace_bytes_says_what_zstd_says_of_a_corrupt_file(tmp_path):
    path = _zst(tmp_path, json.dumps({"spans": [{"n": i} for i in range(2000)]}).encode())
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF  # the frame's checksum
    path.write_bytes(bytes(data))
    with pytest.raises(OutputError, match=r"is truncated or corrupt \(zstd .*checksum") as exc:
        read_trace_bytes(path)
    assert not exc.value.truncated


def test_validate_names_a_truncated_compressed_file_instead_of_a_json_error(tmp_path):
    path = _zst(tmp_path, json.dumps({"spans": []}).encode() + b" " * 5000)
    path.write_bytes(path.read_bytes()[:-6])
    deviations = check_file(path).deviations
    assert len(deviations) == 1 and "is truncated or corrupt" in deviations[0], deviations
    assert "JSON" not in deviations[0]


def test_verify_reports_a_truncated_compressed_file_under_its_own_heading(packed, tmp_path):
    traces = _copy(packed, tmp_path)
    victim = _packed_files(traces)[1]
    victim.write_bytes(victim.read_bytes()[:-7])
    result = run_fastgen("verify", str(traces))
    assert result.returncode == 1
    assert "0 missing, 0 extra, 0 changed, 1 truncated" in result.stdout
    assert f"  truncated: {victim.relative_to(traces).as_posix()}" in result.stdout


# A compressed dataset against a plain (golden) manifest, and the reverse


def test_compressed_entries_record_their_content_and_plain_entries_stay_as_they_were(packed, small_dataset):
    for rel, entry in json.loads((packed / "manifest.json").read_bytes())["files"].items():
        if rel.endswith(".zst"):
            plain = record(rel, read_trace_bytes(packed / rel))
            assert entry["content"] == {"size": plain.size, "xxh3_128": plain.digest}
        else:
            assert sorted(entry) == ["size", "xxh3_128"]
    for entry in json.loads((small_dataset / "traces" / "manifest.json").read_bytes())["files"].values():
        assert sorted(entry) == ["size", "xxh3_128"]  # the golden manifest pins these bytes


def test_session_writer_records_the_content_of_a_compressed_file(tmp_path):
    chunks = [b'{"spans": [', b"1, " * 1000, b"2]}"]
    rec = writer.SessionWriter(tmp_path, 3).write("a.json", chunks)
    plain = record("a.json", *chunks)
    assert rec == record("a.json.zst", (tmp_path / "a.json.zst").read_bytes())
    assert rec.content == (plain.size, plain.digest) and rec.plain() == plain


def test_verify_compressed_dataset_against_the_plain_manifest(packed, small_dataset, tmp_path):
    plain_manifest = str(small_dataset / "traces" / "manifest.json")
    result = run_fastgen("verify", str(packed), "--manifest", plain_manifest)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 missing, 0 extra, 0 changed, 0 truncated" in result.stdout

    traces = _copy(packed, tmp_path)
    changed, cut = _packed_files(traces)[:2]
    data = bytearray(changed.read_bytes())
    data[len(data) // 2] ^= 0x01
    changed.write_bytes(bytes(data))
    cut.write_bytes(cut.read_bytes()[:-30])
    result = run_fastgen("verify", str(traces), "--manifest", plain_manifest)
    assert result.returncode == 1
    assert "0 missing, 0 extra, 1 changed, 1 truncated" in result.stdout
    assert f"  changed: {changed.relative_to(traces).as_posix()}" in result.stdout
    assert f"  truncated: {cut.relative_to(traces).as_posix()}" in result.stdout


def test_verify_unpacked_dataset_against_the_compressed_manifest(packed, tmp_path):
    traces = _copy(packed, tmp_path)
    assert run_fastgen("unpack", str(traces)).returncode == 0
    result = run_fastgen("verify", str(traces), "--manifest", str(packed / "manifest.json"))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 missing, 0 extra, 0 changed, 0 truncated" in result.stdout


# The generator's side: reading a dataset (verify, unpack, validate) must start without it, numpy or tokenizers.
_GENERATOR_MODULES = (
    "numpy",
    "tokenizers",
    "fastgen.generator.dataset",
    "fastgen.plans",
    "fastgen.generator.scenarios",
    "fastgen.generator.content",
    "fastgen.generator.shared_blocks",
)


@pytest.mark.parametrize("module", ["fastgen.verify", "fastgen.validate"])
def test_read_side_imports_no_generator(module):
    # A fresh interpreter: this one has long since imported everything.
    probe = f"import sys, {module}; print('\\n'.join(sorted(sys.modules)))"
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    loaded = [m for m in result.stdout.split() if any(m == g or m.startswith(g + ".") for g in _GENERATOR_MODULES)]
    assert loaded == [], f"importing {module} loads {loaded}"
