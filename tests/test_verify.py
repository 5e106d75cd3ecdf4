"""verify, unpack and zstd output, through the real command on real files."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest
import zstandard

from conftest import SMALL, run_fastgen
from fastgen.compression import read_trace_bytes
from fastgen.manifest import record


@pytest.fixture(scope="module")
def packed(tmp_path_factory):
    root = tmp_path_factory.mktemp("packed")
    result = run_fastgen(*SMALL, "--workers", "2", "--compress", "zstd", "--level", "3",
                         "--output-dir", str(root / "traces"), "--config-dir", str(root / "configs"))
    assert result.returncode == 0, result.stderr
    return root / "traces"


def _copy(src, tmp_path):
    dst = tmp_path / "traces"
    shutil.copytree(src, dst)
    return dst


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
    assert "1 missing, 1 extra, 2 changed" in out
    for path in (files[0], files[1], files[2]):
        assert path.relative_to(traces).as_posix() in out
    assert "scenario1/stray.json" in out


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
    assert not list(traces.rglob("*.zst"))
    check = run_fastgen("verify", str(traces), "--manifest", str(small_dataset / "traces" / "manifest.json"))
    assert check.returncode == 0, check.stdout
    assert run_fastgen("verify", str(traces)).returncode == 0


def test_validate_reads_compressed_traces(packed):
    result = run_fastgen("validate", str(packed), "--workers", "1")
    assert result.returncode == 0, result.stdout + result.stderr
    total = next(line for line in result.stdout.splitlines() if line.startswith("total")).split()
    assert total[-1] == "0" and int(total[1]) == len(list(packed.glob("scenario*/*.zst")))
