"""What makes the Kubernetes replay's pods (kubernetes.py) fit a shared cluster: their resources, sized from the
shard; their spread over nodes; the restricted Pod Security profile's securityContext.

Resources: requests equal to limits (the Guaranteed class: a load generator is neither squeezed by its neighbours'
bursts nor evicted first). A pod runs inference-perf's main process and its `load.num_workers` worker processes,
so it asks one core for each; and memory of 1 GiB, half a GiB a process, and four times its shard's dataset file
(datasets turns the JSON rows into Arrow, and the prompts are held as text): an estimate from what the pod holds,
not a measurement, which --cpu and --memory-gib replace.

Spread: at most one pod more on any node than on another (topologySpreadConstraints on kubernetes.io/hostname,
DoNotSchedule), so N load pods do not share a node while others are free and measure their own contention.

Security: the restricted profile's every rule (non-root, no privilege escalation, every capability dropped,
the runtime's default seccomp profile), on every container, init containers included. The images run as root by
default (inference-perf's is python:3.12-slim, busybox's is busybox), so the pods set a user: RUN_AS, with fsGroup
the same, so the volume and the emptyDir are its to write.
"""

from __future__ import annotations

import math
from typing import Optional

__all__ = [
    "RUN_AS",
    "SHELL_RESOURCES",
    "container_security",
    "pod_security",
    "replay_resources",
    "sized_resources",
    "spread",
]

RUN_AS = 65532  # the "nonroot" user of distroless images: a uid no image here gives a name or a home
GIB = 2**30
SHELL_RESOURCES = {  # the wait and the loader: sh, sleep, tar
    "requests": {"cpu": "50m", "memory": "64Mi"},
    "limits": {"cpu": "1", "memory": "256Mi"},
}


def sized_resources(workers: int, dataset_bytes: int) -> tuple[int, int]:
    """(cores, GiB) of one replay pod: a core a process (main + workers), and 1 GiB + 0.5 GiB a process + 4x the
    dataset file, rounded up (module docstring)."""
    processes = max(workers, 0) + 1
    return processes, math.ceil(1 + 0.5 * processes + 4 * dataset_bytes / GIB)


def replay_resources(cpu: Optional[float], memory_gib: Optional[int], sized: tuple[int, int]) -> dict:
    """The replay container's requests = limits: the options where given, else the sized defaults."""
    cores = cpu if cpu is not None else sized[0]
    amount = {"cpu": f"{cores:g}", "memory": f"{memory_gib if memory_gib is not None else sized[1]}Gi"}
    return {"requests": dict(amount), "limits": dict(amount)}


def spread(labels: dict[str, str]) -> list[dict]:
    """The replay pods spread evenly over nodes."""
    return [
        {
            "maxSkew": 1,
            "topologyKey": "kubernetes.io/hostname",
            "whenUnsatisfiable": "DoNotSchedule",
            "nodeTaintsPolicy": "Honor",  # a node the pods cannot use (tainted: GPU, control plane) is no domain
            "labelSelector": {"matchLabels": dict(labels)},
        }
    ]


def pod_security() -> dict:
    return {
        "runAsNonRoot": True,
        "runAsUser": RUN_AS,
        "runAsGroup": RUN_AS,
        "fsGroup": RUN_AS,
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def container_security() -> dict:
    return {
        "runAsNonRoot": True,
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
    }
