"""`fastgen workload show | stats | fit`: the workload a dataset comes from, the statistics of traces, and a
workload fitted to them."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .generate import add_workload_options, effective_workload
from .options import Parser, UsageError, int_in, write_output

__all__ = ["run_workload", "workload_parser"]


_DESCRIPTION = (
    "show: print the effective workload as YAML: the shipped default, or "
    "--workload FILE, with --scale, --budget-scale, --max-model-len and --arrival-window applied; edit it "
    "and generate with fastgen --workload FILE. stats TRACES: the statistics published measurements of "
    "coding agents report (TraceLab, AgentX) and those traffics are compared by (token and session percentiles, "
    "idle gaps, the prompt a session sent before by idle gap, requests per minute), measured on trace files, "
    "beside the published values, or side by side with --against another traffic's, with the difference and "
    "whether it is within each statistic's tolerance. fit TRACES --out FILE: write the agent "
    "workload whose distributions match the traces' (counts, times and prefix sharing only; no text), and print "
    "the traces' statistics beside the fitted workload's, generated at a small scale."
)


def workload_parser() -> argparse.ArgumentParser:
    p = Parser(
        prog="fastgen workload",
        description=_DESCRIPTION,
    )
    p.add_argument(
        "action",
        choices=["show", "stats", "fit"],
        help="show: print the workload; stats: measure traces; fit: a workload fitted to traces",
    )
    p.add_argument(
        "traces",
        nargs="*",
        type=Path,
        help="stats, fit: trace folders or files (*.json spans; *.jsonl: spans one a line, the SDK's log records "
        "whose events carry the spans' messages (gen_ai.client.inference.operation.details, or one a message), in "
        "the same files or others given with them; Mooncake lines; Claude Code session folders, "
        "~/.claude/projects/<project>; or Codex rollouts, ~/.codex/sessions)",
    )
    p.add_argument(
        "--tokenizer",
        metavar="NAME",
        help="stats, fit: count the answers of Claude Code logs (whose own output counts are placeholders) with "
        "this tokenizer (builtin, a tokenizer.json, a model folder or a hub id; default: 4 characters a token)",
    )
    _add_fit_options(p)
    p.add_argument(
        "--against",
        nargs="+",
        type=Path,
        metavar="TRACES",
        help="stats: print the traces' statistics side by side with this traffic's (trace folders or files, or a "
        "fastgen output folder), the difference and whether it is within each statistic's tolerance",
    )
    p.add_argument(
        "--json",
        type=Path,
        help="stats, fit: also write the measured statistics to this JSON file (stats --against: both traffics' "
        "and, for each statistic, the difference, tolerance and whether it holds; fit: the traces' and the fitted's)",
    )
    p.add_argument(
        "--block-size",
        type=int_in(1, 4096, "--block-size"),
        default=512,
        help="stats, fit: tokens per Mooncake hash id",
    )
    add_workload_options(p)
    return p


def _add_fit_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", type=Path, metavar="FILE", help="fit: the workload YAML to write")
    p.add_argument(
        "--check-sessions",
        type=int_in(1, 1000, "--check-sessions"),
        default=40,
        help="fit: sessions of the fitted workload generated (built-in tokenizer, a temporary folder) to measure it",
    )
    p.add_argument(
        "--family",
        choices=["auto", "chat", "agent"],
        default="auto",
        help="fit: the workload family: chat (conversations, no tools) or agent (agent loops); auto: chat where no "
        "request calls a tool. Mooncake lines cannot show tool calls, so an agent's Mooncake trace needs agent",
    )


def run_workload(args) -> int:
    if args.action == "stats":
        return _run_stats(args)
    if args.action == "fit":
        return _run_fit(args)
    if args.traces or args.against or args.json or args.out or args.tokenizer:
        raise UsageError("TRACES, --against, --json, --out and --tokenizer are for `fastgen workload stats` and `fit`")
    from ..generator.workload import workload_yaml

    sys.stdout.write(workload_yaml(effective_workload(args)))
    return 0


def _run_stats(args) -> int:
    """The statistics of the traces beside the published ones, or side by side with --against's traffic (then the
    difference and whether it is within tolerance); --json: the measured statistics, or both and the comparison."""
    import json

    from ..traffic.stats import comparison, comparison_table, fidelity_table, traffic_stats, unavailable

    if not args.traces:
        raise UsageError("fastgen workload stats needs trace folders or files (e.g. traces/)")
    requests = _read(args, args.traces)
    against = _read(args, args.against) if args.against else None
    measured = traffic_stats(requests)
    if against is None:
        print(fidelity_table(measured, None))
        _print_unavailable(unavailable(requests, measured), "")
        if args.json is not None:
            write_output(args.json, json.dumps(measured, indent=1) + "\n", "--json")
        return 0
    reference = traffic_stats(against)
    names = [" ".join(str(p) for p in paths) for paths in (args.traces, args.against)]
    print(comparison_table(measured, reference, traffic_name=names[0], against_name=names[1]))
    _print_unavailable(unavailable(requests, measured), f"{names[0]}: ")
    _print_unavailable(unavailable(against, reference), f"{names[1]}: ")
    if args.json is not None:
        document = {
            "traffic": {"paths": [str(p) for p in args.traces], **_counts(measured)},
            "against": {"paths": [str(p) for p in args.against], **_counts(reference)},
            "statistics": comparison(measured, reference),
        }
        write_output(args.json, json.dumps(document, indent=1) + "\n", "--json")
    return 0


def _counts(stats) -> dict:
    return {"sessions": stats["sessions"], "requests": stats["requests"]}


def _print_unavailable(lines: list[str], prefix: str) -> None:
    """Why a statistic shows '-': once for each reason, below the table."""
    for line in lines:
        print(f"{prefix}'-' where {line.removeprefix('- ')}")


def _run_fit(args) -> int:
    """The agent workload fitted to the traces, written to --out only when it is whole; the traces' statistics
    beside the fitted workload's, and one line for each the agent workload cannot express."""
    from ..generator.spec import DEFAULT_MAX_MODEL_LEN
    from ..generator.workload import workload_yaml
    from ..traffic import fidelity_table
    from ..fitting.fitted import fit_and_measure
    from ..generator.scenarios import in_spec

    if not args.traces or args.out is None:
        raise UsageError(
            "fastgen workload fit needs trace folders or files and --out FILE (e.g. traces/ --out my.yaml)"
        )
    if args.against:
        raise UsageError("--against is for `fastgen workload stats`")
    shaped = args.workload or (args.scale, args.budget_scale) != (1.0, 1.0) or hasattr(args, "arrival_window")
    if shaped:
        raise UsageError(
            "fastgen workload fit takes its workload from the traces; drop --workload, --scale, --budget-scale and "
            "--arrival-window (edit the written YAML, or pass it to fastgen with --scale)"
        )
    if not args.out.parent.is_dir():
        raise UsageError(f"--out {args.out}: folder {args.out.parent} does not exist; create it first")
    requests = _read(args, args.traces)
    fitted = fit_and_measure(
        requests,
        max_model_len=getattr(args, "max_model_len", DEFAULT_MAX_MODEL_LEN),
        sessions=args.check_sessions,
        family=args.family,
    )
    chosen = ", ".join(scenario.name for scenario in in_spec(fitted.spec))
    how = "--family" if args.family != "auto" else "chat where no request calls a tool; else --family"
    print(f"fitted as: {chosen} ({how})")
    print(fidelity_table(fitted.measured, fitted.reference, reference_name="traces", measured_name="fitted"))
    print(f"(the fitted workload: {args.check_sessions} sessions generated with the built-in tokenizer)")
    for line in fitted.unexpressed:
        print(f"not expressed: {line}")
    write_output(args.out, workload_yaml(fitted.spec), "--out")
    if args.json is not None:
        import json

        write_output(
            args.json, json.dumps({"traces": fitted.reference, "fitted": fitted.measured}, indent=1) + "\n", "--json"
        )
    return 0


def _read(args, paths):
    """The traffic of the trace files, and a line for each thing their forms cannot see (before the tables)."""
    from ..traffic import read_traffic

    count = None
    if args.tokenizer:
        from ..formats.tokenizer import load_tokenizer

        count = load_tokenizer(args.tokenizer).count
    notes: list[str] = []
    requests = read_traffic(paths, block_size=args.block_size, count_tokens=count, notes=notes)
    for line in notes:
        print(f"note: {line}")
    return requests
