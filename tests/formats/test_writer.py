"""writer.py: vectored writes of many chunks, the uncached-write flag and its fallback, on real files."""

from __future__ import annotations

import os
import sys

import pytest

from fastgen.formats import writer
from fastgen.formats.manifest import record


def _chunks() -> list[bytes]:
    # More buffers than one vectored write takes (IOV_MAX), empty ones among them, and a large one.
    small = [f'{{"n": {i}}},'.encode() for i in range(2500)]
    return [b"[", b"", *small[:1200], b"", bytes(range(256)) * 4000, *small[1200:], b"]"]


def test_session_writer_writes_the_chunks_joined_and_records_their_hash(tmp_path):
    chunks = _chunks()
    rec = writer.SessionWriter(tmp_path, None).write("a.json", chunks)
    data = (tmp_path / "a.json").read_bytes()
    assert data == b"".join(chunks)
    assert rec == record("a.json", data)
    assert not list(tmp_path.glob("*.part"))


@pytest.mark.skipif(not (sys.platform.startswith("linux") and hasattr(os, "pwritev")), reason="Linux pwritev only")
def test_a_write_flag_the_kernel_refuses_falls_back_to_plain_writes(tmp_path):
    # An RWF flag no kernel knows is refused with EOPNOTSUPP, as RWF_DONTCACHE is by kernels before 6.14 (EINVAL
    # from some) and by filesystems without uncached buffered I/O.
    session = writer.SessionWriter(tmp_path, None)
    session.writes.flags = 1 << 30
    chunks = _chunks()
    session.write("a.json", chunks)
    assert (tmp_path / "a.json").read_bytes() == b"".join(chunks)
    assert session.writes.flags == 0  # the rest of this writer's files are written plainly
    session.write("b.json", chunks[:3])
    assert (tmp_path / "b.json").read_bytes() == b"".join(chunks[:3])


@pytest.mark.skipif(not hasattr(os, "pwritev"), reason="pwritev only")
def test_short_writes_resume_at_the_right_offset_and_buffer(tmp_path, monkeypatch):
    # The kernel may write fewer bytes than asked (a signal, a full pipe, a quota): at most 7 bytes a call here.
    real = os.pwritev

    def short(fd, buffers, offset, flags=0):
        first = bytes(buffers[0][:7]) if len(buffers[0]) else b""
        return real(fd, [first], offset, flags)

    monkeypatch.setattr(os, "pwritev", short)
    chunks = [b"{", b"", b'"spans": [1, 2, 3]', b"x" * 20, b"}"]
    writer.SessionWriter(tmp_path, None).write("a.json", chunks)
    assert (tmp_path / "a.json").read_bytes() == b"".join(chunks)


def test_a_failed_write_names_the_file_and_leaves_no_part_file(tmp_path):
    blocked = tmp_path / "not-a-folder"
    blocked.write_text("")
    with pytest.raises(writer.OutputError, match="not-a-folder"):
        writer.SessionWriter(blocked, None).write("a.json", [b"{}"])
    assert [p.name for p in tmp_path.iterdir()] == ["not-a-folder"]
