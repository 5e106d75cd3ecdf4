"""fastgen.formats.atomic: one file written through a temporary name beside it and a rename."""

from __future__ import annotations

import os
import stat

import pytest

from fastgen.formats.atomic import atomic_open, temp_path, write_atomically


def test_write_atomically_text_is_utf8_with_newlines_as_they_are(tmp_path):
    target = tmp_path / "a.yml"
    write_atomically(target, "é\nb\r\n")
    assert target.read_bytes() == "é\nb\r\n".encode("utf-8")
    assert os.listdir(tmp_path) == ["a.yml"]  # no temporary file left


def test_write_atomically_replaces_an_existing_file(tmp_path):
    target = tmp_path / "manifest.json"
    target.write_bytes(b"old")
    write_atomically(target, b"new")
    assert target.read_bytes() == b"new"


@pytest.mark.parametrize("error", [OSError(28, "No space left on device"), KeyboardInterrupt()])
def test_atomic_open_error_in_the_block_keeps_the_old_file_and_removes_the_temporary(tmp_path, error):
    target = tmp_path / "report.md"
    target.write_bytes(b"old")
    with pytest.raises(type(error)):
        with atomic_open(target) as handle:
            handle.write(b"half of the ne")
            assert temp_path(target).is_file()  # the bytes go to a name beside the target, not the target
            raise error
    assert target.read_bytes() == b"old"
    assert sorted(os.listdir(tmp_path)) == ["report.md"]


def test_write_atomically_named_temporary_is_used_and_gone(tmp_path):
    target, temp = tmp_path / "manifest.json", tmp_path / "manifest.json.part"
    temp.write_bytes(b'{"gener')  # what a kill left: overwritten, then renamed into place
    write_atomically(target, b"{}", temp=temp)
    assert target.read_bytes() == b"{}" and not temp.exists()


def test_write_atomically_missing_folder_raises_oserror_and_leaves_nothing(tmp_path):
    with pytest.raises(FileNotFoundError):
        write_atomically(tmp_path / "no such folder" / "a.json", b"{}")
    assert os.listdir(tmp_path) == []


def test_write_atomically_file_mode_honours_the_umask(tmp_path):
    old = os.umask(0o022)
    try:
        write_atomically(tmp_path / "c10.yml", "x")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "c10.yml").stat().st_mode) == 0o644  # readable by others, as a config should be
