"""zstd for trace files: a compressor per process, and a reader that sees every frame of a file and refuses one
that is truncated or corrupt (CorruptTrace, an OutputError).

Frames carry their content size and a checksum, so the standard `zstd -d` restores a `.json.zst` on its own.
inference-perf reads plain `.json` only: `fastgen unpack DIR` restores them.
"""

from __future__ import annotations

from pathlib import Path

from ..errors import OutputError

__all__ = [
    "ZSTD_SUFFIX",
    "CorruptTrace",
    "make_compressor",
    "compress_chunks",
    "decompress",
    "declared_size",
    "read_trace_bytes",
]

ZSTD_SUFFIX = ".zst"
# A span repeats the previous span's whole input: a window of at least 2 MiB finds it. Levels below 3 default to
# smaller windows and then compress 3.6x worse and run slower (measured by native_bench on the default set).
_MIN_WINDOW_LOG = 21
_MAX_FRAME_HEADER = 18  # ZSTD_FRAMEHEADERSIZE_MAX: enough to read a frame's content size
_MIN_WRITE, _MAX_WRITE = 1 << 17, 1 << 26  # decompression output buffer, bytes (trace files are a few MB)


def make_compressor(level: int):
    import zstandard

    params = zstandard.ZstdCompressionParameters.from_level(level, write_checksum=1, write_content_size=1)
    if params.window_log < _MIN_WINDOW_LOG:
        params = zstandard.ZstdCompressionParameters.from_level(
            level, window_log=_MIN_WINDOW_LOG, write_checksum=1, write_content_size=1
        )
    return zstandard.ZstdCompressor(compression_params=params)


def compress_chunks(compressor, chunks: list[bytes]) -> list[bytes]:
    """One zstd frame (with content size and checksum) of the chunks' concatenation, without joining them."""
    stream = compressor.compressobj(size=sum(len(c) for c in chunks))
    out = [stream.compress(c) for c in chunks]
    out.append(stream.flush())
    return [c for c in out if c]


class CorruptTrace(OutputError):
    """A `.json.zst` that does not decompress; `truncated` when its bytes end inside a frame."""

    def __init__(self, path: Path, detail: str, *, truncated: bool):
        super().__init__(f"{path} is truncated or corrupt ({detail}); regenerate the dataset or restore the file")
        self.path, self.detail, self.truncated = path, detail, truncated


def _declared_size(data) -> int | None:
    """The content size a frame header declares, None when the header is cut short or does not say."""
    import zstandard

    try:
        size = zstandard.frame_content_size(data[:_MAX_FRAME_HEADER])
    except zstandard.ZstdError:
        return None
    return size if size >= 0 else None


def declared_size(path: Path) -> int | None:
    """The content size the first frame header of a `.json.zst` declares, from its first bytes: the whole content
    for the one frame fastgen writes, a lower bound for joined shards. None if unreadable or not declared."""
    try:
        with open(path, "rb") as f:
            return _declared_size(f.read(_MAX_FRAME_HEADER))
    except OSError:
        return None


def _cut_short(decoded: int, declared: int | None) -> str:
    if declared is None:
        return f"it ends inside a zstd frame, after {decoded} decoded bytes"
    if decoded < declared:
        return f"it ends inside a zstd frame: {decoded} of the {declared} bytes its header declares"
    return "it ends inside a zstd frame, before the frame's checksum"


def decompress(data: bytes, path: Path) -> bytes:
    """Every frame of a zstd stream, one after the other.

    python-zstandard's stream reader returns what it decoded so far when the input stops inside a frame, even
    before the frame's checksum: a truncated file would read back short without a word. So each frame is decoded
    on its own and must reach its end; raises CorruptTrace otherwise, with zstd's own text for a corrupt one.
    """
    import zstandard

    if not data:
        raise CorruptTrace(path, "the file is empty", truncated=True)
    dctx = zstandard.ZstdDecompressor()
    out: list[bytes] = []
    rest = data
    while rest:
        declared = _declared_size(rest)
        # One output buffer of the declared size (capped) instead of 128 KiB pieces joined at the end.
        frame = dctx.decompressobj(write_size=min(max(declared or 0, _MIN_WRITE), _MAX_WRITE))
        try:
            out.append(frame.decompress(rest))
        except zstandard.ZstdError as exc:
            raise CorruptTrace(path, str(exc), truncated=False) from None  # "zstd decompressor error: ..."
        if not frame.eof:
            raise CorruptTrace(path, _cut_short(len(out[-1]), declared), truncated=True)
        rest = frame.unused_data
    return out[0] if len(out) == 1 else b"".join(out)


def read_trace_bytes(path: Path) -> bytes:
    """The JSON bytes of a trace file, `.json` or `.json.zst` (every frame: joined shards are several)."""
    data = path.read_bytes()
    return decompress(data, path) if path.name.endswith(ZSTD_SUFFIX) else data
