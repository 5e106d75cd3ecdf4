"""`fastgen [generate]` and `fastgen workload show`: the dataset and configs, and the workload they come from."""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from pathlib import Path

from ..version import __version__
from .options import (
    DEFAULT_MODEL,
    DEFAULT_PROMETHEUS_URL,
    DEFAULT_SEED,
    MAX_SEED,
    Parser,
    UsageError,
    add_replay_modes,
    int_in,
    positive_float,
    url_option,
    warn,
    write_output,
)

__all__ = ["add_workload_options", "effective_workload", "generate_parser", "run_generate"]


def generate_parser() -> argparse.ArgumentParser:
    p = Parser(
        prog="fastgen",
        description="Generate the coding-agent KV-cache benchmark: trace files for "
        "inference-perf's otel_trace_replay and one config per scenario and load level.",
        epilog="Other commands: fastgen workload show, fastgen validate DIR, fastgen verify DIR, fastgen unpack "
        "DIR (each with --help). `fastgen generate ...` is the same as `fastgen ...`. Your own workload: "
        "fastgen workload show > my.yaml, edit it, then fastgen --workload my.yaml.",
    )
    p.add_argument("--version", action="version", version=f"fastgen {__version__}")
    _dataset_identity_options(p)
    add_workload_options(p)
    p.add_argument(
        "--from-manifest",
        type=Path,
        metavar="MANIFEST",
        help="regenerate the dataset a manifest describes, byte for byte: its workload, seed, model, "
        "tokenizer and compression",
    )
    p.add_argument("--output-dir", type=Path, default=Path("traces"), help="the trace folder")
    p.add_argument("--config-dir", type=Path, default=Path("configs"), help="the inference-perf config folder")
    p.add_argument(
        "--workers",
        type=int_in(1, 1024, "--workers"),
        default=os.cpu_count() or 1,
        help="worker processes (the bytes are the same for every number)",
    )
    _inference_perf_options(p)
    p.add_argument(
        "--compress",
        choices=["zstd"],
        help="write .json.zst trace files (fastgen unpack DIR restores .json) and .jsonl.zst dataset files",
    )
    p.add_argument("--level", type=int_in(1, 22, "--level"), help="zstd level, with --compress zstd (unset: 3)")
    p.add_argument(
        "--no-cache",
        action="store_true",
        help="build the content pools afresh and keep none (by default they are kept in "
        "$XDG_CACHE_HOME/fastgen, ~/.cache/fastgen, and a later run with the same fastgen, tokenizer "
        "and seed starts from them; the output is the same bytes either way)",
    )
    p.add_argument(
        "--timings",
        type=Path,
        metavar="FILE",
        help="write where the run's wall time went to FILE (JSON: the end of each phase on the machine's "
        "monotonic clock, for native_bench's critical path); the dataset is the same bytes either way",
    )
    p.add_argument(
        "--force",
        action="store_true",
        help="write into folders that hold other files; fastgen then "
        "replaces only files its previous manifest lists and never overwrites one it did not write",
    )
    return p


def _dataset_identity_options(p: argparse.ArgumentParser) -> None:
    """What a dataset is made for and from: the model, its tokenizer, how prompts are counted, the seed."""
    p.add_argument(
        "--model",
        default=argparse.SUPPRESS,
        help=f"model name in the spans and server.model_name in the configs: the name your server serves "
        f"(default: {DEFAULT_MODEL})",
    )
    p.add_argument(
        "--tokenizer",
        help="tokenizer.json, a model folder, a hub id (the local HF cache first, then a "
        "download of its tokenizer files; HF_TOKEN, HF_ENDPOINT, HF_HUB_OFFLINE apply), or 'builtin' "
        "(default: --model's tokenizer)",
    )
    p.add_argument(
        "--tokenizer-revision",
        metavar="REV",
        help="with a hub id: the branch, tag or commit to use (the manifest records the commit)",
    )
    p.add_argument(
        "--count",
        choices=["template", "content"],
        default=argparse.SUPPRESS,
        help="what gen_ai.usage.input_tokens counts: template, the tokens of the prompt the server "
        "renders with the tokenizer's chat template (what it reports as prompt_tokens); content, the "
        "messages' and tools' text alone (default: template when the tokenizer has a chat template)",
    )
    p.add_argument(
        "--chat-template",
        metavar="FILE|NAME",
        help="a Jinja chat template file (as vLLM's and SGLang's --chat-template take), or one fastgen ships "
        "(qwen: Qwen2.5/Qwen3; llama3: Llama 3.1-3.3; chatml: hermes-style tool calls), to count prompts "
        "with, for a tokenizer without one or in place of its own; copied into the dataset's tokenizer "
        "folder as chat_template.jinja, and its name and sha256 recorded in the manifest",
    )
    p.add_argument(
        "--seed",
        type=int_in(0, MAX_SEED, "--seed"),
        default=argparse.SUPPRESS,
        help=f"seed of every RNG stream (default: {DEFAULT_SEED})",
    )


def _inference_perf_options(p: argparse.ArgumentParser) -> None:
    """What the inference-perf configs say: the server they address, where reports go, its metrics, the replay's
    waits and source, and how paths are written."""
    from ..formats.config_dialect import METRICS_TYPES, SERVER_TYPES, SOURCES

    p.add_argument("--server-type", choices=SERVER_TYPES, default="vllm", help="server.type of the configs")
    p.add_argument(
        "--label",
        help="the configs send reports to reports/LABEL/<scenario>/<config>/, so two servers' "
        "runs stay apart (default: the --server-type)",
    )
    p.add_argument(
        "--base-url",
        type=url_option("--base-url"),
        default="http://localhost:8000",
        help="server base URL written into the configs",
    )
    p.add_argument(
        "--prometheus-url",
        type=url_option("--prometheus-url"),
        help="Prometheus base URL; when given, the configs collect the server's metrics from it "
        f"(--metrics prometheus; without --metrics default and this, {DEFAULT_PROMETHEUS_URL})",
    )
    p.add_argument(
        "--metrics",
        choices=METRICS_TYPES,
        help="metrics.type of the configs (default: prometheus with --prometheus-url, else default: "
        "client-side reports only, no Prometheus queries and no wait after the load)",
    )
    p.add_argument(
        "--max-wait-ms",
        type=int_in(0, 10**7, "--max-wait-ms"),
        help="cap on the recorded gaps the replay waits out between turns (max_wait_ms in the configs; "
        "unset: inference-perf's 15000); for quick functional runs",
    )
    add_replay_modes(p, from_configs=False)
    p.add_argument(
        "--source",
        choices=SOURCES,
        default="dataset",
        help="where the configs read the sessions: dataset, each trace directory's session-per-row file "
        "(SCENARIO.jsonl beside it, read through hf_dataset_path: inference-perf starts in seconds and reads one "
        "session at a time), or traces, the trace directory (inference-perf parses every file before it starts)",
    )
    p.add_argument("--absolute-paths", action="store_true", help="write absolute paths into the configs")


def add_workload_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--workload",
        metavar="FILE",
        help="a workload YAML file (`fastgen workload show > my.yaml` writes one to edit), or a shipped "
        "one: default, 32k, smoke, agent, declared, fleet, field (default: default, the benchmark's numbers)",
    )
    p.add_argument(
        "--max-model-len",
        type=int_in(1024, 10**8, "--max-model-len"),
        default=argparse.SUPPRESS,
        help="context window every request must fit, max_tokens included (default: the workload's, "
        "131072 in the default one)",
    )
    p.add_argument("--scale", type=positive_float("--scale"), default=1.0, help="multiply every session count")
    p.add_argument(
        "--budget-scale",
        type=positive_float("--budget-scale"),
        default=1.0,
        help="multiply every token budget (small, fast datasets for tests)",
    )
    p.add_argument(
        "--arrival-window",
        type=int_in(1, 86400, "--arrival-window"),
        default=argparse.SUPPRESS,
        help="seconds over which the sessions of scenarios with arrivals (scenario 3) arrive: session_rate "
        "in their configs (default: the workload's, 1200 in the default one)",
    )


def effective_workload(args):
    """The workload of --workload (the shipped default without it), with the command line's changes applied."""
    from ..generator.workload import default_workload, resolve_workload

    spec = resolve_workload(args.workload) if args.workload else default_workload()
    if hasattr(args, "max_model_len"):
        spec = dataclasses.replace(spec, max_model_len=args.max_model_len, window_from="")
    if (args.scale, args.budget_scale) != (1.0, 1.0):
        spec = spec.scaled(sessions=args.scale, budgets=args.budget_scale)
    if hasattr(args, "arrival_window"):
        spec = spec.with_scenarios(
            {
                name: dataclasses.replace(sc, arrival_window_s=args.arrival_window)
                for name, sc in spec.scenarios.items()
                if hasattr(sc, "arrival_window_s")
            }
        )
    return spec


# --tokenizer may point at the same tokenizer elsewhere (another machine's path): its sha256 is checked
_FROM_MANIFEST_TAKES = (
    "--workload",
    "--seed",
    "--model",
    "--scale",
    "--budget-scale",
    "--max-model-len",
    "--arrival-window",
    "--compress",
    "--level",
    "--count",
)


def _given(args, option: str) -> bool:
    value = getattr(args, option.lstrip("-").replace("-", "_"), None)
    return value is not None and value is not False and not (option in ("--scale", "--budget-scale") and value == 1.0)


def _run_plan(args):
    """The run's plan (generator.plan_from.RunPlan): from the options given, or read back from --from-manifest."""
    from ..generator.plan_from import RunPlan, plan_from_manifest

    if args.from_manifest is not None:
        taken = [option for option in _FROM_MANIFEST_TAKES if _given(args, option)]
        if taken:
            raise UsageError(
                f"--from-manifest takes the workload, seed, model and compression from the manifest; drop {taken[0]}"
            )
        return plan_from_manifest(
            args.from_manifest, tokenizer=args.tokenizer, tokenizer_revision=args.tokenizer_revision
        )
    if args.level is not None and not args.compress:
        raise UsageError("--level needs --compress zstd")
    model, seed = getattr(args, "model", DEFAULT_MODEL), getattr(args, "seed", DEFAULT_SEED)
    tokenizer = args.tokenizer or model
    zstd_level = (3 if args.level is None else args.level) if args.compress else None
    arguments = {
        "model": model,
        "tokenizer": tokenizer,
        "seed": seed,
        "workload": args.workload or "default",
        "scale": args.scale,
        "budget_scale": args.budget_scale,
        "max_model_len": getattr(args, "max_model_len", None),
        "zstd_level": zstd_level,
        "arrival_window": getattr(args, "arrival_window", None),
        "count": getattr(args, "count", "auto"),
    }
    if args.tokenizer_revision:
        arguments["tokenizer_revision"] = args.tokenizer_revision
    if args.chat_template is not None:
        arguments["chat_template"] = str(args.chat_template)
    return RunPlan(
        spec=effective_workload(args),
        model=model,
        tokenizer=tokenizer,
        revision=args.tokenizer_revision,
        seed=seed,
        zstd_level=zstd_level,
        arguments=arguments,
    )


def _config_options(args):
    from ..generator.configs import ConfigOptions

    metrics = args.metrics or ("prometheus" if args.prometheus_url else "default")
    return ConfigOptions(
        server_type=args.server_type,
        base_url=args.base_url,
        prometheus_url=args.prometheus_url or DEFAULT_PROMETHEUS_URL,
        metrics=metrics,
        max_wait_ms=args.max_wait_ms,
        absolute_paths=args.absolute_paths,
        label=args.label,
        outputs=args.outputs,
        tool_call_max_tokens=args.tool_call_max_tokens,
        tool_choice=args.tool_choice,
        source=args.source,
    )


def _start_line(args, plan, tokenizer, config_options) -> str:
    """What the run is made with: model, tokenizer, seed, workers, server, metrics and how prompts are counted."""
    from ..generator.plan_from import counting_line

    ident = tokenizer.identity
    metrics = (
        "metrics from Prometheus at " + config_options.prometheus_url
        if config_options.metrics == "prometheus"
        else "metrics: default (no Prometheus queries; give --prometheus-url to collect the server's)"
    )
    return (
        f"fastgen {__version__}: model {plan.model}, tokenizer {ident.source} (sha256 {ident.sha256[:12]}, "
        f"vocab {ident.vocab_size}, {'additive' if tokenizer.additive else 'non-additive: counting whole texts'}), "
        f"seed {plan.seed}, {args.workers} worker(s), {args.server_type} at {args.base_url}, {metrics}; "
        f"{counting_line(tokenizer, plan.count, plan.model)}"
    )


def run_generate(args) -> int:
    from ..generator.timeline import Timeline

    timeline = Timeline()
    timeline.mark("command")  # interpreter, imports and the parser: everything before this command's own work
    if args.timings is not None and not args.timings.parent.is_dir():
        raise UsageError(f"--timings {args.timings}: folder {args.timings.parent} does not exist; create it first")
    plan = _run_plan(args)
    from ..generator.output import TOKENIZER_FOLDER, RunOptions, generate
    from ..generator.plan_from import load_planned_tokenizer, tokenizer_warnings

    timeline.mark("workload")
    tokenizer = load_planned_tokenizer(plan, chat_template=args.chat_template)
    for line in tokenizer_warnings(
        tokenizer,
        model=plan.model,
        default_model=DEFAULT_MODEL,
        model_given=hasattr(args, "model"),
        tokenizer_name=plan.tokenizer,
        server_type=args.server_type,
    ):
        warn(line)
    config_options = _config_options(args)
    say = (lambda *a: None) if args.quiet else (lambda *a: print(*a, file=sys.stderr))
    say(_start_line(args, plan, tokenizer, config_options))
    options = RunOptions(
        model=plan.model,
        tokenizer=plan.tokenizer,
        seed=plan.seed,
        spec=plan.spec,
        output_dir=args.output_dir,
        workers=args.workers,
        progress=not args.quiet and sys.stderr.isatty(),
        arguments=plan.arguments,
        zstd_level=plan.zstd_level,
        force=args.force,
        config_dir=args.config_dir,
        configs=config_options,
        count=plan.count,
        notice=warn,
        pool_cache=not args.no_cache,
        timeline=timeline,
    )
    timeline.mark("tokenizer")
    records = generate(options, tokenizer)
    if args.timings is not None:
        write_output(args.timings, timeline.document(), "--timings")
    traces = [r for r in records if not r.path.startswith(TOKENIZER_FOLDER + "/")]
    say(
        f"wrote {len(traces)} trace files ({sum(r.size for r in traces) / 1e9:.2f} GB) to {args.output_dir} "
        f"and the configs to {args.config_dir}"
    )
    return 0
