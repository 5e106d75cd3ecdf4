"""What an analysis is asked to do, checked and assembled from plain values: which configs (or trace directories),
the tokenizer folder, the server a bakeoff run recorded, and the options over the engine's defaults.

The command hands in what was given; everything here raises SpecError (exit 2, as a usage error) naming the flag to
change, so that `fastgen analyze` and `fastgen export` only translate their arguments and map errors."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

from ..errors import SpecError
from ..traces.blocks import load_reading
from .analyze import AnalysisOptions, ConfigTarget, config_targets, directory_targets, kv_bytes_per_token
from .calibrate import calibrate, calibrated_options
from .routing import POLICIES
from .rules import ENGINE_RULES
from .serving import ServerSpec, server_from

__all__ = [
    "all_config_targets",
    "analysis_options",
    "dataset_targets",
    "matching_targets",
    "served_options",
    "server_of",
]


def _config_dir(folder: Path, configs: Path | None) -> Path | None:
    """The configs to simulate: those given, or DIR/../configs when it holds a manifest; None: none."""
    config_dir = configs or (folder.resolve().parent / "configs")
    if configs is not None or (config_dir / "manifest.json").is_file():
        return config_dir
    return None


def _tokenizer_of(folder: Path) -> Path:
    # a dataset's own folder, or the one beside a trace directory of it
    return folder / "tokenizer" if (folder / "tokenizer").exists() else folder.parent / "tokenizer"


def dataset_targets(
    folder: Path, *, tokenizer: Path | None = None, configs: Path | None = None
) -> tuple[list[ConfigTarget], Path]:
    """(the configs to simulate, or each trace directory read once without configs; the tokenizer folder)."""
    if not folder.is_dir():
        raise SpecError(f"{folder} is not a folder; give the trace folder fastgen wrote (e.g. traces)")
    tokenizer = tokenizer or _tokenizer_of(folder)
    if not tokenizer.exists():
        raise SpecError(f"no tokenizer at {tokenizer}; pass --tokenizer with the dataset's tokenizer folder")
    config_dir = _config_dir(folder, configs)
    if config_dir is not None:
        return config_targets(config_dir, folder), tokenizer
    return directory_targets(folder), tokenizer


def all_config_targets(folder: Path, configs: Path | None = None) -> list[ConfigTarget] | None:
    """Every config of the dataset (a run to calibrate from may be of one --only leaves out); None without configs."""
    config_dir = _config_dir(folder, configs)
    return None if config_dir is None else config_targets(config_dir, folder)


def matching_targets(targets: Sequence[ConfigTarget], patterns: Sequence[str]) -> list[ConfigTarget]:
    """The targets named by a pattern (scenario1/c10, 'scenario3/*'; a scenario alone names its configs)."""
    kept = [t for t in targets if any(fnmatchcase(t.name, p) or fnmatchcase(t.name, p + "/*") for p in patterns)]
    if not kept:
        raise SpecError(f"no config matches {' '.join(patterns)}")
    return kept


def server_of(run_dir: Path, engine: str | None = None) -> ServerSpec:
    """The server a bakeoff run (or a folder above runs) was made against; an engine given must be its engine."""
    server = server_from(run_dir)
    if engine is not None and engine != server.engine:
        raise SpecError(
            f"--engine {engine}, but {run_dir}'s runs were against {server.engine}; drop --engine, "
            f"or give runs of a {engine} server"
        )
    return server


def _capacity(
    server: ServerSpec | None, kv_cache_tokens: int | None, kv_cache_gib: float | None, model_config: Path | None
) -> int | None:
    if kv_cache_gib is not None:
        if model_config is None:
            raise SpecError("--kv-cache-gib needs --model-config (the model's config.json) for the bytes per token")
        return int(kv_cache_gib * 2**30 // kv_bytes_per_token(model_config))
    if kv_cache_tokens is None and server is not None:
        return server.capacity_tokens
    return kv_cache_tokens


def _fleet(server: ServerSpec | None, replicas: int | None, router: str | None) -> tuple[int, str]:
    """(replicas, router policy): as given, else as the server's runs recorded them (behind a router: the fleet's),
    else one engine."""
    replicas = replicas or (server.replicas if server is not None else 1)
    router = router or (server.router if server is not None and server.router else "round_robin")
    if replicas > 1 and router not in POLICIES:
        raise SpecError(
            f"--server-from: its runs went through a router with the policy {router!r}, which analyze cannot model; "
            f"give --router ({', '.join(POLICIES)}) to predict for a policy it models"
        )
    return replicas, router


def analysis_options(
    *,
    server: ServerSpec | None = None,
    engine: str | None = None,
    definition: str = "vllm",
    reading: str = "auto",
    block_size: int | None = None,
    kv_cache_tokens: int | None = None,
    kv_cache_gib: float | None = None,
    model_config: Path | None = None,
    batch_tokens: int | None = None,
    max_running: int | None = None,
    schedule_policy: str | None = None,
    sweep: bool = False,
    band: int = 8,
    replicas: int | None = None,
    router: str | None = None,
) -> AnalysisOptions:
    """AnalysisOptions from what was given, over the server's recorded settings where given, over the engine's
    defaults."""
    replicas, router = _fleet(server, replicas, router)
    chosen = engine or (server.engine if server is not None else "vllm")
    capacity = _capacity(server, kv_cache_tokens, kv_cache_gib, model_config)
    if definition == "aiperf":
        if capacity is not None:
            raise SpecError("AIPerf's definition has no capacity (an infinite cache); drop --kv-cache-tokens/-gib")
        if engine not in (None, "vllm") or server is not None:
            raise SpecError(
                "AIPerf's definition has no engine rules; drop --engine/--server-from or --definition aiperf"
            )
    rules = ENGINE_RULES[chosen]
    block_size = block_size or (
        512 if definition == "aiperf" else server.block_size if server is not None else rules.default_block_size
    )
    if schedule_policy == "lpm" and chosen != "sglang":
        raise SpecError("--schedule-policy lpm is SGLang's; vLLM schedules FCFS (drop it, or --engine sglang)")
    given: dict[str, Any] = {"batch_tokens": batch_tokens, "max_running": max_running, "policy": schedule_policy}
    settings = replace(
        server.settings if server is not None else rules.defaults, **{k: v for k, v in given.items() if v is not None}
    )
    return AnalysisOptions(
        block_size=block_size,
        capacity_tokens=capacity,
        reading=reading,
        definition=definition,
        sweep=sweep,
        engine=chosen,
        settings=settings,
        band=0 if definition == "aiperf" else band,
        replicas=replicas,
        router=router,
    )


def served_options(
    options: AnalysisOptions,
    targets: list[ConfigTarget],
    tokenizer: Path,
    *,
    calibrate_from: Path | None = None,
    every: list[ConfigTarget] | None = None,
    prefill_tokens_per_s: float | None = None,
    decode_tokens_per_s: float | None = None,
) -> tuple[AnalysisOptions, str | None]:
    """(the options with the service model and band speeds, where the speeds come from; None: defaults or given).
    With `calibrate_from`, the speeds are fitted to its runs, looked up among `every` config (else `targets`)."""
    calibration = None
    if calibrate_from is not None:
        reading = load_reading(tokenizer, options.reading)
        calibration = calibrate(calibrate_from, every or targets, reading, options)
    return calibrated_options(
        options, calibration, prefill_tokens_per_s=prefill_tokens_per_s, decode_tokens_per_s=decode_tokens_per_s
    )
