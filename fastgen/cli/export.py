"""`fastgen export`: a replay in another tool's trace format (Mooncake, AIPerf's dag_jsonl), or one config's replay
as disjoint shards for several load generators, plain or as a Kubernetes Indexed Job."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit

from .analysis import targets_of
from .options import Parser, UsageError, int_in, positive_float, warn

__all__ = ["export_parser", "run_export"]


def export_parser() -> Parser:
    p = Parser(
        prog="fastgen export",
        description="Write a replay in another tool's trace format, or one config's replay as disjoint shards.",
    )
    p.add_argument(
        "format",
        choices=["mooncake", "dag_jsonl", "mooncake_sessions", "shards", "kubernetes"],
        help="mooncake: one JSON line per request with hash_ids, for "
        "AIPerf (analyze-trace, mooncake_trace), vLLM bench serve (timed_trace), SGLang bench_serving; "
        "dag_jsonl: one JSON line per conversation with the messages, sessions as turns, forks and spawns, "
        "for AIPerf's dag_jsonl dataset (--custom-dataset-type dag_jsonl); "
        "mooncake_sessions: one JSON line per request with its whole prompt, each session's first at a start drawn "
        "from a Poisson process at the config's session_rate and the rest after their recorded waits, for AIPerf's "
        "mooncake_trace dataset with --fixed-schedule (sessions that arrive as a Poisson process); "
        "shards: the config DIR's replay split into --shards N inference-perf configs, each with its own "
        "sessions, for N load generators; "
        "kubernetes: the same shards as an Indexed Job of N inference-perf pods, with the ConfigMap, volume and "
        "loader it needs (a folder to kubectl apply)",
    )
    p.add_argument(
        "dir", type=Path, help="a dataset folder, or one trace directory (shards, kubernetes: a config file)"
    )
    p.add_argument(
        "--out",
        type=Path,
        required=True,
        help="the JSON-lines file to write (shards: the folder of shard-NN/; kubernetes: a folder to kubectl apply)",
    )
    p.add_argument(
        "--shards", type=int, metavar="N", help="shards, kubernetes: how many (1 up to the config's sessions)"
    )
    p.add_argument(
        "--base-url",
        help="shards, kubernetes: the server as the load generators reach it, e.g. http://vllm.serving.svc:8000 "
        "(unset: as the config names it; a generated config names localhost:8000)",
    )
    p.add_argument(
        "--config",
        metavar="NAME",
        help="the config whose replay to export (e.g. scenario1/c10; "
        "required when DIR has configs beside it and more than one of them)",
    )
    p.add_argument("--configs", type=Path, metavar="CONFIG_DIR", help="the configs (default: DIR/../configs)")
    p.add_argument("--tokenizer", type=Path, help="the tokenizer folder (default: DIR/tokenizer)")
    p.add_argument("--reading", choices=["auto", "template", "content"], default="auto")
    p.add_argument(
        "--block-size", type=int_in(1, 4096, "--block-size"), default=512, help="tokens per hash id (Mooncake's 512)"
    )
    p.add_argument(
        "--session-rate",
        type=positive_float("--session-rate", most=1e6),
        help="mooncake_sessions: sessions a second of the Poisson process (default: the config's session_rate)",
    )
    _kubernetes_options(p)
    return p


def _kubernetes_options(p: Parser) -> None:
    k = p.add_argument_group("kubernetes")
    k.add_argument("--image", help="the inference-perf image (default: inference-perf 0.7.0's release image)")
    k.add_argument("--namespace", help="the namespace of every object (unset: kubectl's current one)")
    k.add_argument("--storage-class", help="the volume's storage class, one with ReadWriteMany (unset: the default)")
    k.add_argument(
        "--volume-gib", type=int_in(1, 1 << 20, "--volume-gib"), help="the volume's size (unset: twice the data + 1)"
    )
    k.add_argument("--name", help="the Job's name, and the others' prefix (unset: fastgen-FOLDER-CONFIG)")
    k.add_argument(
        "--shell-image", help="the image of the loader and the dataset wait: sh, tar (default: busybox:1.36)"
    )
    k.add_argument(
        "--cpu",
        type=positive_float("--cpu", most=1024),
        help="each load pod's cores, requested and its limit (unset: one a process, inference-perf's main process and "
        "its load.num_workers)",
    )
    k.add_argument(
        "--memory-gib",
        type=int_in(1, 4096, "--memory-gib"),
        help="each load pod's memory in GiB, requested and its limit (unset: 1, 0.5 a process, and 4x the largest "
        "shard's dataset file, rounded up: an estimate)",
    )
    k.add_argument(
        "--start-margin",
        type=positive_float("--start-margin", most=86400),
        default=None,
        metavar="S",
        help="the pods start their load together S seconds after the last one is ready (unset: 30)",
    )
    k.add_argument(
        "--reset-url",
        action="append",
        metavar="URL",
        help="pod 0 POSTs this before the start to empty the engine's prefix cache; repeat it for each replica behind "
        "a router (unset: the engine's reset endpoint at the server's URL, e.g. BASE/reset_prefix_cache for vLLM)",
    )
    k.add_argument(
        "--no-reset", action="store_true", default=None, help="do not empty the engine's cache before the load starts"
    )


_KUBERNETES_ONLY = (
    "image",
    "namespace",
    "storage_class",
    "volume_gib",
    "name",
    "shell_image",
    "cpu",
    "memory_gib",
    "start_margin",
    "reset_url",
    "no_reset",
)
_SHARDED_ONLY = ("base_url",)


def run_export(args) -> int:
    given = [f"--{name.replace('_', '-')}" for name in _KUBERNETES_ONLY if getattr(args, name) is not None]
    if given and args.format != "kubernetes":
        raise UsageError(f"{', '.join(given)} is for fastgen export kubernetes, not {args.format}")
    sharded = [f"--{name.replace('_', '-')}" for name in _SHARDED_ONLY if getattr(args, name) is not None]
    if sharded and args.format not in ("shards", "kubernetes"):
        raise UsageError(f"{', '.join(sharded)} is for fastgen export shards and kubernetes, not {args.format}")
    if args.format == "shards":
        return _export_shards(args)
    if args.format == "kubernetes":
        return _export_kubernetes(args)
    if args.shards is not None:
        raise UsageError("--shards is for `fastgen export shards CONFIG` and `fastgen export kubernetes CONFIG`")
    from ..analysis.analyze import Corpus
    from ..export import mooncake_lines, write_mooncake
    from ..extras import require_extra
    from ..traces.blocks import load_reading

    require_extra("validate", "fastgen export")  # before any file is read: it reads them as inference-perf does
    targets, tokenizer = targets_of(args)
    if args.config:
        targets = [t for t in targets if t.name == args.config.removesuffix(".yml")]
        if not targets:
            raise UsageError(f"no config {args.config!r} replays a trace directory of {args.dir}")
    elif len(targets) > 1:
        raise UsageError(
            f"{args.dir} has {len(targets)} configs or trace directories "
            f"({', '.join(t.name for t in targets[:4])}, ...); pick one with --config NAME, or give one "
            f"trace directory"
        )
    (target,) = targets
    corpus = Corpus(target.trace_dir, load_reading(tokenizer, args.reading), args.block_size)
    if args.session_rate is not None and args.format != "mooncake_sessions":
        raise UsageError("--session-rate is the rate of mooncake_sessions' arrivals; drop it, or export that format")
    if args.format == "dag_jsonl":
        return _export_dag(args, target, corpus)
    if args.format == "mooncake_sessions":
        return _export_sessions(args, target, corpus)
    lines = mooncake_lines(target, corpus)
    write_mooncake(lines, args.out)
    if not args.quiet:
        print(
            f"wrote {len(lines)} requests of {target.name} ({len({r['session_id'] for r in lines})} sessions) to "
            f"{args.out}"
        )
    return 0


def _export_shards(args) -> int:
    from ..bakeoff.shards import write_shards

    if args.shards is None:
        raise UsageError("fastgen export shards needs --shards N (how many load generators)")
    paths = write_shards(args.dir, args.shards, args.out, base_url=args.base_url)
    if not args.quiet:
        print(
            f"wrote {len(paths)} shards of {args.dir} to {args.out}: copy each shard-NN folder to its machine and "
            f"run inference-perf from inside it (its reports are written there)"
        )
    return 0


def _export_sessions(args, target, corpus) -> int:
    from ..export import mooncake_sessions, write_mooncake

    rate = args.session_rate or target.load.session_rate
    if not rate:
        raise UsageError(
            f"{target.name} has no session_rate (its sessions start as slots free up); give --session-rate R"
        )
    export = mooncake_sessions(target, corpus, rate)
    write_mooncake(export.lines, args.out)
    if not args.quiet:
        print(
            f"wrote {export.sessions} sessions of {target.name} ({len(export.lines)} requests) to {args.out}, "
            f"starting as a Poisson process of {rate:.6g} sessions a second over {export.window_s:.6g} s; replay "
            f"with: aiperf profile --input-file {args.out} --custom-dataset-type mooncake_trace --fixed-schedule "
            f"(with --model, --url, --endpoint-type chat, --tokenizer)"
        )
    return 0


def _export_dag(args, target, corpus) -> int:
    from ..export import dag_export, write_dag

    export = dag_export(target, corpus)
    write_dag(export.conversations, args.out)
    if not args.quiet:
        print(
            f"wrote {export.sessions} sessions of {target.name} ({export.requests} requests in "
            f"{len(export.conversations)} conversations, {export.forks} forked, {export.spawns} spawned) to {args.out}"
        )
        for note in export.unexpressed[:5]:
            print(f"  not as inference-perf replays it: {note}")
        if len(export.unexpressed) > 5:
            print(f"  ... and {len(export.unexpressed) - 5} more")
    return 0


def _export_kubernetes(args) -> int:
    from ..export.kubernetes import (
        IMAGE,
        SHELL_IMAGE,
        KubernetesOptions,
        check_name,
        default_name,
        default_reset,
        write_kubernetes,
    )
    from ..bakeoff.shards import plan_shards
    from ..formats.config_document import ConfigDocument

    if args.shards is None:
        raise UsageError("fastgen export kubernetes needs --shards N: how many pods share the replay")
    if args.no_reset and args.reset_url:
        raise UsageError("--no-reset and --reset-url say opposite things; give one")
    if args.no_reset:
        reset: tuple[str, ...] = ()
    else:
        reset = tuple(args.reset_url or default_reset(plan_shards(args.dir, args.shards, base_url=args.base_url)[0]))
    options = KubernetesOptions(
        name=check_name(args.name) if args.name else default_name(args.dir),
        image=args.image or IMAGE,
        namespace=args.namespace,
        storage_class=args.storage_class,
        volume_gib=args.volume_gib,
        base_url=args.base_url,
        shell_image=args.shell_image or SHELL_IMAGE,
        cpu=args.cpu,
        memory_gib=args.memory_gib,
        reset=reset,
        **({} if args.start_margin is None else {"start_margin_s": args.start_margin}),
    )
    export = write_kubernetes(args.dir, args.shards, args.out, options)
    url = str(ConfigDocument(export.shards[0].config).base_url or "")
    if urlsplit(url).hostname in ("localhost", "127.0.0.1", "::1"):
        warn(
            f"the pods' configs name the server {url}, which inside a pod is the pod: give --base-url an address they reach"
        )
    if not args.quiet:
        sessions = sum(len(s.slots) for s in export.shards)
        print(
            f"wrote {options.name}: {len(export.shards)} pods replaying {sessions} sessions of {args.dir} "
            f"({export.data_bytes / 1e6:.1f} MB of data for a {export.volume_gib} GiB volume) to {export.out}; "
            f"the kubectl steps are in {export.out / 'README.md'}"
        )
    return 0
