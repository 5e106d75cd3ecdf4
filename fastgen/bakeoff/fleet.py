"""An engine behind a router: the replay goes to the router's URL, while each replica behind it is reset, verified,
sampled and watched on its own.

A router (vllm-router, sglang-router, llm-d's inference gateway, Dynamo's frontend) serves the OpenAI API and hands
most other paths to one replica of its choosing: vllm-router 0.1.17 sends `POST /reset_prefix_cache` and
`GET /metrics` to a single worker. Pointed at the router alone, the bakeoff would empty one replica's cache and read
one replica's counters. So it takes the replicas too: `--replica URL` for each, or what the router lists
(`GET /workers`, then `GET /list_workers`: vllm-router and sglang-router answer both; llm-d's gateway lists none).
The policy the router routes by is part of every run's identity: `--router-policy NAME` says it, or the `policy`
label of the router's own decision counter (`--router-metrics URL`, its Prometheus endpoint:
vllm_router_policy_decisions_total; sglang-router 0.3.2's smg_worker_selection_total).

Before each run every replica is waited on until idle and its cache emptied and verified with the probe (reset.py):
a replica whose reset cannot be verified stops the bakeoff (its figures would start warm), and so does one that
serves no /metrics or reports no cached tokens (its figures could not be counted). While the replay runs, each
sample reads every replica's /metrics: a line holds each replica's own (`replicas`) and the fleet's (`metrics`:
counters and gauges summed, KV usage weighted by each replica's capacity). The run record's `fleet` holds each
replica's requests, prompt tokens and cached tokens over the run (its counters' growth from the first sample to the
last) and their sums. A replica that stops answering or restarts fails the run, as a lone server does.

One server without a router is a fleet of one (`Fleet.single`): the runner does the same for both.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Optional

from ..errors import ServerError
from ..extras import import_extra
from .identity import process_start, server_identity
from .preflight import Preflight, check_server, check_tool_choice
from .reset import PROBE_PROMPT, verified_reset, wait_idle
from .sampler import parse_metrics
from .server import LiveServer, fetch, probe_server
from .status import RunCounts

__all__ = ["FIGURES", "Fleet", "listed_replicas", "open_fleet", "policy_in_metrics"]

# what the run record's `fleet` counts per replica: its name there -> the engine quantity (engines.METRIC_MEANINGS)
FIGURES = {"requests": "requests", "prompt_tokens": "prompt_tokens", "cached_tokens": "cache_hits"}
# the counter families whose `policy` label names the routing policy: vllm-router's and older sglang-routers'
# (*_policy_decisions_total), sglang-router 0.3.2's (smg_worker_selection_total, seen 2026-12-06)
_DECISION_FAMILIES = ("policy_decisions", "worker_selection")
# where routers list their replicas, and how to read the answer
_LISTINGS = (
    ("/workers", lambda document: [w["url"] for w in document["workers"]]),  # {"workers": [{"url": ...}, ...]}
    ("/list_workers", lambda document: list(document["urls"])),  # {"urls": [...]}
)
_LIST_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class Fleet:
    """Where the replay goes (`front`: the router, or the one server) and the engines that serve it."""

    front: LiveServer
    replicas: tuple[LiveServer, ...]  # sorted by URL; (front,) without a router
    policy: Optional[str] = None  # the router's routing policy; None: no router
    policy_from: Optional[str] = None  # where the policy was told: "--router-policy" or the router's metrics
    listed_by: Optional[str] = None  # "GET /workers" when the router listed the replicas; None: --replica
    capacities: tuple[Optional[int], ...] = ()  # each replica's KV capacity in tokens, as it reported it

    @classmethod
    def single(cls, server: LiveServer) -> "Fleet":
        return cls(server, (server,))

    @property
    def routed(self) -> bool:
        return self.policy is not None

    def describe(self) -> str:
        """A few words for the bakeoff's opening line ("" for one server)."""
        if not self.routed:
            return ""
        how = f"listed by {self.listed_by}" if self.listed_by else "from --replica"
        return f"; a router ({self.policy}) in front of {len(self.replicas)} replicas ({how})"

    def wait_started(self, echo) -> None:
        """Wait until every replica has finished starting (SGLang's warmup: reset.py, server.py)."""
        for replica in self.replicas:
            if replica.starting():
                echo(
                    f"{replica.url}: {replica.engine.name} is still starting (GET {replica.engine.ready_path} "
                    f"answers 503); waiting"
                )
                replica.wait_started()

    def server_identity(self, model: str, gpus: Optional[int]) -> dict:
        """The run identity's server: the one server's, or the fleet's (the router's URL, the replicas' engine, version
        and block size, their KV capacities summed, no process start: each replica's is in router_identity)."""
        if not self.routed:
            return server_identity(self.front, model, gpus)
        each = [server_identity(r, model) for r in self.replicas]
        capacities = [e["kv_capacity_tokens"] for e in each]
        return {
            "url": self.front.url,
            "engine": self.front.engine.name,
            "version": _one(e["version"] for e in each),
            "model": model,
            "kv_capacity_tokens": sum(capacities) if all(capacities) else None,
            "block_size": _one(e["block_size"] for e in each),
            "gpus": gpus,
            "process_start": None,
        }

    def router_identity(self, model: str) -> Optional[dict]:
        """The run identity's router: its URL and policy, the replicas' URLs and each one's server identity."""
        if not self.routed:
            return None
        return {
            "url": self.front.url,
            "policy": self.policy,
            "policy_from": self.policy_from,
            "listed_by": self.listed_by,
            "replica_urls": [r.url for r in self.replicas],
            "replicas": [server_identity(r, model) for r in self.replicas],
        }

    def check(self, model: str, *, tool_check: bool) -> Preflight:
        """The check before the first config (preflight.py). Behind a router each replica must serve /metrics and
        report cached tokens (or its figures cannot be counted and its reset not verified): ServerError if not; the
        named tool_choice is checked through the router, as the replay sends it."""
        if not self.routed:
            return check_server(self.front, model, tool_check=tool_check)
        for replica in self.replicas:
            found = check_server(replica, model, tool_check=False)
            engine = replica.engine
            if not found.metrics_served:
                raise ServerError(
                    f"replica {replica.url} serves no /metrics (HTTP 404), so its requests and cache hits cannot be "
                    f"counted; restart it with {engine.metrics_flag or 'its metrics on'}"
                )
            if found.cached_tokens_reported is not True:
                said = "got no answer" if found.cached_tokens_reported is None else "got no cached tokens"
                raise ServerError(
                    f"replica {replica.url}: a probe prompt sent to it twice {said} the second time, so its reset "
                    f"cannot be verified; restart it with {engine.cache_report_flag} and prefix caching on"
                )
        held = check_tool_choice(self.front, model) if tool_check else None
        return Preflight(True, True, held)

    def wait_idle(self) -> None:
        for replica in self.replicas:
            wait_idle(replica)

    def reset(self, model: str) -> dict:
        """Empty every replica's prefix cache and verify it (reset.py); the run record's reset. Behind a router a
        replica whose reset is not verified raises ServerError: the run would start warm there."""
        if not self.routed:
            return verified_reset(self.front, model)
        done = []
        for replica in self.replicas:
            result = verified_reset(replica, model)
            if result["verified"] is not True:
                raise ServerError(
                    f"replica {replica.url}: its reset is not verified ({result['how']}); fix that replica (its "
                    f"{replica.engine.cache_report_flag}), or pass --no-reset"
                )
            done.append({"url": replica.url, **result})
        return {
            "done": f"{done[0]['done']} on each of {len(done)} replicas",
            "verified": True,
            "how": f"verified on each of {len(done)} replicas with the probe prompt",
            "replicas": done,
        }

    def sample(self) -> dict:
        """One sample of /metrics (sampler.py): the server's, or each replica's and the fleet's."""
        prefix = f"{self.front.engine.name}:"
        if not self.routed:
            return {"metrics": parse_metrics(self.front.metrics_text(), prefix)}
        each = {}
        for replica in self.replicas:
            try:
                each[replica.url] = parse_metrics(replica.metrics_text(), prefix)
            except (OSError, ServerError, ValueError) as exc:
                raise ServerError(f"replica {replica.url}: {exc}") from None
        return {"metrics": self._fleet_metrics(list(each.values())), "replicas": each}

    def _fleet_metrics(self, samples: list[dict[str, float]]) -> dict[str, float]:
        """The fleet's sample: every counter and gauge summed over the replicas, but KV usage (a fraction of each
        replica's cache) weighted by each replica's capacity (equally where one is not known)."""
        fractions = set(self.front.engine.metrics.get("kv_usage", ()))
        known = [c for c in self.capacities if c]
        weights = [float(c) for c in known] if len(known) == len(samples) else [1.0] * len(samples)
        fleet: dict[str, float] = {}
        for name in sorted({n for s in samples for n in s}):
            present = [(s[name], w) for s, w in zip(samples, weights) if name in s]
            if name in fractions:
                fleet[name] = sum(v * w for v, w in present) / sum(w for _, w in present)
            else:
                fleet[name] = sum(v for v, _ in present)
        return fleet

    def starts(self) -> tuple[Optional[float], ...]:
        """Each replica's process start time, for restart()."""
        return tuple(process_start(r) for r in self.replicas)

    def restart(self, before: tuple[Optional[float], ...], counts: Optional[RunCounts]) -> Optional[str]:
        """How a restart during the run shows, or None: a replica's process start time changed, or requests lost
        their connection to a server that answers again."""
        for replica, was in zip(self.replicas, before):
            now = process_start(replica)
            if was is not None and now is not None and now != was:
                who = f"replica {replica.url}: " if self.routed else ""
                return f"{who}its process start time changed"
        if counts is not None and counts.connection_failures:
            return f"{counts.connection_failures} requests lost their connection"
        return None

    def dead(self) -> Optional[str]:
        """What stopped answering ("the server", "the router", "replica URL"), or None."""
        if not self.front.answers():
            return "the router" if self.routed else "the server"
        for replica in self.replicas if self.routed else ():
            if not replica.answers():
                return f"replica {replica.url}"
        return None

    def figures(self, first: Optional[dict], last: Optional[dict]) -> Optional[dict]:
        """The run record's `fleet`: each replica's counters' growth from the first sample to the last (FIGURES),
        and their sums; None without a router. A replica whose counters are missing has None there (and the sum
        too): a figure is never a part of the whole."""
        if not self.routed:
            return None
        rows = []
        for replica in self.replicas:
            row: dict = {"url": replica.url}
            for name, quantity in FIGURES.items():
                row[name] = _growth(first, last, replica.url, replica.engine, quantity)
            rows.append(row)
        total = {
            name: (sum(r[name] for r in rows) if all(r[name] is not None for r in rows) else None) for name in FIGURES
        }
        return {"router": self.front.url, "policy": self.policy, "replicas": rows, "sum": total}


def _growth(first: Optional[dict], last: Optional[dict], url: str, engine, quantity: str) -> Optional[int]:
    values = [engine.metric(((s or {}).get("replicas") or {}).get(url) or {}, quantity) for s in (first, last)]
    if values[0] is None or values[1] is None:
        return None
    return int(round(values[1] - values[0]))


def _one(values) -> Optional[object]:
    """The value all replicas share; None when they differ or none says."""
    found = {v for v in values if v is not None}
    return found.pop() if len(found) == 1 else None


def listed_replicas(url: str) -> tuple[list[str], Optional[str]]:
    """The replica URLs a router lists, and where it listed them ("GET /workers"); ([], None) when it lists none."""
    for path, read in _LISTINGS:
        try:
            answer = fetch(url + path, timeout_s=_LIST_TIMEOUT_S)
            urls = [str(u).rstrip("/") for u in read(json.loads(answer.body))] if answer.status == 200 else []
        except (OSError, ValueError, TypeError, KeyError, AttributeError):
            continue
        if urls:
            return urls, f"GET {path}"
    return [], None


def policy_in_metrics(metrics_url: str) -> list[str]:
    """The policies a router's Prometheus endpoint names on its decision counters (`policy` label of a family
    ending in one of _DECISION_FAMILIES); [] when none (no request was routed yet). Raises ServerError when it does
    not answer."""
    try:
        answer = fetch(metrics_url)
    except OSError as exc:
        raise ServerError(f"cannot reach the router's metrics at {metrics_url} ({exc}); fix --router-metrics") from None
    if answer.status != 200:
        raise ServerError(f"GET {metrics_url} answered HTTP {answer.status}; fix --router-metrics")
    parser = import_extra("prometheus_client.parser", extra="bakeoff", command="fastgen bakeoff")
    found = set()
    try:
        for family in parser.text_string_to_metric_families(answer.body.decode("utf-8", "replace")):
            if family.name.removesuffix("_total").endswith(_DECISION_FAMILIES):
                found |= {s.labels["policy"] for s in family.samples if s.labels.get("policy")}
    except ValueError:
        raise ServerError(f"GET {metrics_url} is not Prometheus text; fix --router-metrics") from None
    return sorted(found)


def open_fleet(
    front: LiveServer,
    model: str,
    *,
    replicas: tuple[str, ...] = (),
    policy: Optional[str] = None,
    router_metrics: Optional[str] = None,
) -> Fleet:
    """The fleet behind `front`. A router is declared by --replica, --router-policy or --router-metrics, or found
    by its listing; without any of those `front` is one server. Raises ServerError for a replica that does not
    answer, serves another model or engine, a router that lists no replicas and was given none, and a policy that
    cannot be told."""
    given = [u.rstrip("/") for u in replicas]
    twice = sorted({u for u in given if given.count(u) > 1})
    if twice:
        raise ServerError(f"--replica {twice[0]} is given twice; give each replica once")
    listed_by = None
    if not given:
        given, listed_by = listed_replicas(front.url)
        if not given:
            if policy is None and router_metrics is None:
                return Fleet.single(front)
            raise ServerError(
                f"the router at {front.url} lists no replicas (GET /workers, GET /list_workers): pass each "
                f"replica's base URL with --replica URL"
            )
    servers = tuple(_replica(url, front, model) for url in sorted(given))
    policy, policy_from = _policy(front, model, policy, router_metrics)
    capacities = tuple(server_identity(s, model)["kv_capacity_tokens"] for s in servers)
    return Fleet(front, servers, policy, policy_from, listed_by, capacities)


def _replica(url: str, front: LiveServer, model: str) -> LiveServer:
    try:
        answer = fetch(url + "/v1/models")
    except OSError as exc:
        reason = getattr(exc, "reason", None) or exc
        raise ServerError(
            f"replica {url} does not answer ({reason}); start it, or give the replicas behind {front.url} with "
            f"--replica URL"
        ) from None
    if answer.status != 200:
        raise ServerError(
            f"replica {url}: GET /v1/models answered HTTP {answer.status}; give each replica's base URL (without "
            f"/v1) with --replica"
        )
    replica = probe_server(url, model, front.engine.name)
    if _owner(answer.body) not in ("", front.engine.model_owner):
        raise ServerError(
            f"replica {url} is not {front.engine.name}, as the router's answers are: a bakeoff measures one engine "
            f"behind a router; pass --engine, or give replicas of one engine"
        )
    return replica


def _owner(body: bytes) -> str:
    try:
        owners = {str(e.get("owned_by", "")) for e in json.loads(body)["data"]}
    except (ValueError, KeyError, TypeError, AttributeError):
        return ""
    return owners.pop() if len(owners) == 1 else ""


def _policy(front: LiveServer, model: str, given: Optional[str], metrics_url: Optional[str]) -> tuple[str, str]:
    """(the routing policy, where it was told). The router's metrics name it once a request was routed: one probe
    is sent through the router first, before any reset."""
    if metrics_url is None:
        if given is None:
            raise ServerError(
                f"cannot tell the routing policy of {front.url}; pass --router-policy NAME (the router's own "
                f"--policy, e.g. cache_aware or round_robin), or --router-metrics URL (its Prometheus endpoint)"
            )
        return given, "--router-policy"
    found = policy_in_metrics(metrics_url)
    if not found:
        front.chat_usage(model, PROBE_PROMPT)
        found = policy_in_metrics(metrics_url)
    if given is not None and given not in found:
        raise ServerError(
            f"--router-policy {given}, but the router's metrics at {metrics_url} say {', '.join(found) or 'none'}: "
            f"restart the router with the policy you mean, or fix --router-policy"
        )
    if given is None and len(found) != 1:
        raise ServerError(
            f"the router's metrics at {metrics_url} name {', '.join(found) or 'no'} policies; pass --router-policy "
            f"NAME to say which one routes these runs"
        )
    return given or found[0], f"the router's metrics ({metrics_url})"
