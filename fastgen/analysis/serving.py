"""The server to predict for, as a bakeoff run recorded it (`fastgen analyze --server-from RUN_DIR`): its engine, KV
capacity and block or page size, and its scheduler settings (bakeoff/scheduling.py records them in each engine's
own names; here they become rules.SchedulerSettings).

A run recorded before fastgen read scheduler settings, or from a server that does not report them (vLLM without
VLLM_SERVER_DEV_MODE, a router in front), has none: the engine's defaults stand in (rules.py says which), and the
prediction says so, setting by setting.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from ..formats.run_folder import RUN_FILE, runs_at
from ..formats.run_record import read_run, router_fleet
from ..errors import SpecError
from .rules import ENGINE_RULES, SchedulerSettings

__all__ = ["ServerSpec", "server_from", "settings_from_record"]

_FIX = "give a run folder fastgen bakeoff wrote (OUT/LABEL/<scenario>/<config>/repeat-K) or a folder above runs"
# SGLang's cache-aware policies other than lpm, which the model runs as FCFS
_AS_FCFS = ("dfs-weight", "hrrn", "shortest-prefill-first", "random", "lof", "priority", "routing-key")


@dataclass(frozen=True)
class ServerSpec:
    engine: str
    version: Optional[str]
    capacity_tokens: Optional[int]
    block_size: int
    settings: SchedulerSettings
    source: Path
    defaulted: tuple[str, ...] = ()  # settings the record did not give: the engine's defaults stand in
    notes: tuple[str, ...] = field(default_factory=tuple)  # settings the model does not follow
    replicas: int = 1  # behind a router: how many (capacity_tokens is each one's)
    router: Optional[str] = None  # the router's policy, as the runs recorded it; None: no router

    def describe(self) -> str:
        """One line: the server the prediction is for, and where its settings come from."""
        name = f"{self.engine} {self.version}" if self.version else self.engine
        capacity = f"{self.capacity_tokens:,} tokens" if self.capacity_tokens else "not recorded"
        fleet = f"{self.replicas} replicas behind {self.router}, " if self.replicas > 1 else ""
        line = (
            f"server from {self.source}: {name}, {fleet}KV capacity {capacity}{' per replica' if fleet and self.capacity_tokens else ''}, "
            f"{'page size' if self.engine == 'sglang' else 'block size'} {self.block_size}; "
            f"{self.settings.describe(self.engine)}"
        )
        if self.defaulted:
            line += f" (the run records no {', '.join(self.defaulted)}: {ENGINE_RULES[self.engine].defaults_from})"
        return line + "".join(f"; {note}" for note in self.notes)


def server_from(run_dir: Path) -> ServerSpec:
    """The server the runs under `run_dir` (one run folder, or a folder above several) were made against; a SpecError
    naming the folder when it holds no run record, or runs against different servers."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise SpecError(f"--server-from {run_dir} is not a folder; {_FIX}")
    servers = []
    for folder in runs_at(run_dir):
        record = read_run(folder)
        server = record.identity.get("server") if record else None  # format 2's: one that names its block size
        if isinstance(server, dict) and server.get("engine"):
            servers.append((folder, {**server, "fleet": _fleet(folder, record.identity)}))  # type: ignore[union-attr]
    if not servers:
        raise SpecError(f"--server-from {run_dir} holds no {RUN_FILE} that names its server; {_FIX}")
    first_folder, first = servers[0]
    for folder, server in servers[1:]:
        for key in ("engine", "kv_capacity_tokens", "block_size", "fleet"):
            if server.get(key) != first.get(key):
                raise SpecError(
                    f"--server-from {run_dir}: {first_folder} and {folder} ran against different servers ({key} "
                    f"{first.get(key)} and {server.get(key)}); give one label's folder or one run"
                )
    engine = str(first["engine"])
    if engine not in ENGINE_RULES:
        raise SpecError(
            f"--server-from {run_dir}: its runs were against {engine}, whose rules analyze does not know; use "
            f"--engine {' or --engine '.join(ENGINE_RULES)} with the settings as flags"
        )
    settings, defaulted, notes = settings_from_record(engine, first.get("scheduler"))
    block = first.get("block_size")
    if not isinstance(block, int) or block <= 0:
        block = ENGINE_RULES[engine].default_block_size
        defaulted = ("block size", *defaulted)
    replicas, router, capacity = first["fleet"] if first["fleet"][0] > 1 else (1, None, first.get("kv_capacity_tokens"))
    return ServerSpec(
        engine=engine,
        version=first.get("version"),
        capacity_tokens=capacity if isinstance(capacity, int) and capacity > 0 else None,
        block_size=block,
        settings=settings,
        source=run_dir,
        defaulted=defaulted,
        notes=notes,
        replicas=replicas,
        router=router,
    )


def _fleet(folder: Path, identity: dict) -> tuple[int, Optional[str], Optional[int]]:
    """(replicas, the router's policy, each replica's KV capacity) of a run through a router (the identity's router:
    its policy and each replica's server), (1, None, None) of one without; a SpecError for replicas that recorded
    different capacities (analyze models replicas of one)."""
    fleet = router_fleet(identity)
    if fleet is None or len(fleet.capacities) < 2:
        return 1, None, None
    found = {c for c in fleet.capacities if c is not None}  # a replica that recorded none is unknown, not different
    if len(found) > 1:
        raise SpecError(
            f"--server-from {folder}: its replicas recorded different KV capacities "
            f"({', '.join(sorted(map(str, found)))}); analyze models replicas of one: give --replicas and "
            "--kv-cache-tokens"
        )
    capacity = found.pop() if found else None
    return len(fleet.capacities), fleet.policy, capacity if isinstance(capacity, int) else None


def settings_from_record(
    engine: str, recorded: Optional[dict]
) -> tuple[SchedulerSettings, tuple[str, ...], tuple[str, ...]]:
    """(the settings, the ones the record lacked, notes on ones the model does not follow) from what the bakeoff
    recorded in the engine's own names (bakeoff/scheduling.py)."""
    recorded = recorded if isinstance(recorded, dict) else {}
    defaults = ENGINE_RULES[engine].defaults
    given, notes = (_vllm_given if engine == "vllm" else _sglang_given)(recorded)
    missing = tuple(
        name
        for name, present in (
            ("batch token budget", "batch_tokens" in given),
            ("request limit", "max_running" in given),
            ("schedule policy", "policy" in given or engine == "vllm"),
        )
        if not present
    )
    settings = SchedulerSettings(
        **{
            **{k: getattr(defaults, k) for k in SchedulerSettings.__dataclass_fields__},
            **given,
        }
    )
    return settings, (missing if recorded else ("scheduler settings",)), tuple(notes)


def _vllm_given(recorded: dict) -> tuple[dict, list[str]]:
    """The settings vLLM's record gives, by SchedulerSettings' names, and notes on the ones not modelled."""
    given: dict = {}
    notes: list[str] = []
    names = {
        "batch_tokens": "max_num_batched_tokens",
        "max_running": "max_num_seqs",
        "chunked_prefill": "enable_chunked_prefill",
        "reserve_full_prompt": "scheduler_reserve_full_isl",
        "watermark": "watermark",
    }
    for field_name, key in names.items():
        if recorded.get(key) is not None:
            given[field_name] = recorded[key]
    if (recorded.get("long_prefill_token_threshold") or 0) > 0:
        notes.append("long_prefill_token_threshold is not modelled (chunks are the whole budget)")
    if recorded.get("async_scheduling"):
        notes.append("async scheduling is modelled as synchronous")
    if recorded.get("policy") not in (None, "fcfs"):
        notes.append(f"policy {recorded['policy']} runs as fcfs (every request has the same priority)")
    return given, notes


def _sglang_given(recorded: dict) -> tuple[dict, list[str]]:
    """The settings SGLang's record gives, by SchedulerSettings' names, and notes on the ones not modelled."""
    given: dict = {}
    notes: list[str] = []
    chunk = recorded.get("chunked_prefill_size")
    if chunk is not None:
        given["batch_tokens"] = chunk if chunk > 0 else None
    if recorded.get("max_prefill_tokens") is not None:
        given["max_prefill_tokens"] = recorded["max_prefill_tokens"]
    running = recorded.get("effective_max_running_requests") or recorded.get("max_running_requests")
    if running is not None:
        given["max_running"] = running
    policy = recorded.get("schedule_policy")
    if policy is not None:
        given["policy"] = "lpm" if policy == "lpm" else "fcfs"
        if policy in _AS_FCFS:
            notes.append(f"schedule_policy {policy} runs as fcfs")
    conservativeness = recorded.get("schedule_conservativeness")
    if conservativeness is not None:
        initial = min(0.7 * float(conservativeness), 1.0)
        given["new_token_ratio"] = (initial, initial * 0.14, 600)
    if recorded.get("enable_mixed_chunk"):
        notes.append("mixed chunks (decode in prefill batches) are modelled as separate steps")
    return given, notes
