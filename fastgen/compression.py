"""zstd for trace files: a compressor per process, and a reader that sees every frame of a file.

Frames carry their content size and a checksum, so the standard `zstd -d` restores a `.json.zst` on its own.
inference-perf reads plain `.json` only: `fastgen unpack DIR` restores them.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["ZSTD_SUFFIX", "make_compressor", "compress_chunks", "read_trace_bytes"]

ZSTD_SUFFIX = ".zst"
# A span repeats the previous span's whole input: a window of at least 2 MiB finds it. Levels below 3 default to
# smaller windows and then compress 3.6x worse and run slower (measured by native_bench on the default set).
_MIN_WINDOW_LOG = 21


def make_compressor(level: int):
    import zstandard

    params = zstandard.ZstdCompressionParameters.from_level(level, write_checksum=1, write_content_size=1)
    if params.window_log < _MIN_WINDOW_LOG:
        params = zstandard.ZstdCompressionParameters.from_level(level, window_log=_MIN_WINDOW_LOG, write_checksum=1,
                                                                write_content_size=1)
    return zstandard.ZstdCompressor(compression_params=params)


def compress_chunks(compressor, chunks: list[bytes]) -> list[bytes]:
    """One zstd frame (with content size and checksum) of the chunks' concatenation, without joining them."""
    stream = compressor.compressobj(size=sum(len(c) for c in chunks))
    out = [stream.compress(c) for c in chunks]
    out.append(stream.flush())
    return [c for c in out if c]


def read_trace_bytes(path: Path) -> bytes:
    """The JSON bytes of a trace file, `.json` or `.json.zst`."""
    with open(path, "rb") as f:
        if not path.name.endswith(ZSTD_SUFFIX):
            return f.read()
        import zstandard

        # Without read_across_frames a reader stops after the first frame, and joined shards read back short.
        with zstandard.ZstdDecompressor().stream_reader(f, read_across_frames=True) as reader:
            return reader.read()
