"""zstd for trace files: a compressor per process, and a reader that sees every frame of a file.

Frames carry their content size and a checksum, so the standard `zstd -d` restores a `.json.zst` on its own.
inference-perf reads plain `.json` only: `fastgen unpack DIR` restores them.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["ZSTD_SUFFIX", "make_compressor", "read_trace_bytes"]

ZSTD_SUFFIX = ".zst"


def make_compressor(level: int):
    import zstandard

    return zstandard.ZstdCompressor(level=level, write_checksum=True, write_content_size=True)


def read_trace_bytes(path: Path) -> bytes:
    """The JSON bytes of a trace file, `.json` or `.json.zst`."""
    with open(path, "rb") as f:
        if not path.name.endswith(ZSTD_SUFFIX):
            return f.read()
        import zstandard

        # Without read_across_frames a reader stops after the first frame, and joined shards read back short.
        with zstandard.ZstdDecompressor().stream_reader(f, read_across_frames=True) as reader:
            return reader.read()
