"""`fastgen validate`, `fastgen verify` and `fastgen unpack`: checks and repairs of a dataset already written."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .options import Parser, UsageError, int_in

__all__ = ["unpack_parser", "run_unpack", "run_validate", "run_verify", "validate_parser", "verify_parser"]


def validate_parser() -> argparse.ArgumentParser:
    p = Parser(prog="fastgen validate", description="Check every trace with inference-perf 0.7.0's own graph builder.")
    p.add_argument("dir", nargs="?", type=Path, help="a dataset folder (or one scenario folder)")
    p.add_argument("--trace", type=Path, help="one trace file")
    p.add_argument("--verbose", action="store_true", help="with --trace: print the whole dependency graph")
    p.add_argument(
        "--workers", type=int_in(1, 1024, "--workers"), default=None, help="worker processes (unset: all cores)"
    )
    return p


def verify_parser() -> argparse.ArgumentParser:
    p = Parser(prog="fastgen verify", description="Re-hash a dataset against its manifest (or another one).")
    p.add_argument("dir", type=Path, help="a dataset folder (the one that holds manifest.json)")
    p.add_argument("--manifest", type=Path, help="compare with this manifest (e.g. a golden one) instead of DIR's")
    return p


def unpack_parser() -> argparse.ArgumentParser:
    p = Parser(
        prog="fastgen unpack",
        description="Restore plain .json from ..json.zst, for configs that read trace directories (--source traces); "
        "the dataset files (.jsonl.zst) stay compressed: the configs read them as they are.",
    )
    p.add_argument("dir", type=Path, help="a dataset folder written with --compress zstd")
    return p


def run_validate(args) -> int:
    from ..extras import require_extra
    from ..dataset_validation import check_file, describe_file, validate_tree
    from ..validate import summary_table

    require_extra("validate", "fastgen validate")
    if args.trace:
        if args.verbose:
            print(describe_file(args.trace))
        report = check_file(args.trace)
        if not args.verbose:
            print(
                f"{args.trace}: {report.events} events, "
                + ("ok" if not report.deviations else "; ".join(report.deviations))
            )
        return 1 if report.deviations else 0
    if args.dir is None:
        raise UsageError("give a dataset folder (fastgen validate DIR) or a file (--trace FILE)")
    reports = validate_tree(args.dir, workers=args.workers, progress=not args.quiet and sys.stderr.isatty())
    print(summary_table(reports))
    return 1 if any(r.deviations for r in reports) else 0


def run_verify(args) -> int:
    from ..verify import verify_tree

    report = verify_tree(args.dir, manifest=args.manifest)
    print(report.summary())
    return 0 if report.ok else 1


def run_unpack(args) -> int:
    from ..verify import unpack_tree

    restored = unpack_tree(args.dir)
    if not args.quiet:
        print(f"restored {restored} .json files in {args.dir}")
    return 0
