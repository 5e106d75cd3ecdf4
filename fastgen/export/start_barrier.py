"""The common start of a Kubernetes replay's pods (kubernetes.py): each pod's inference-perf starts its load at one
time, after every pod is ready, whatever the order in which they were scheduled and pulled their images.

This file runs inside each pod, as it is (the ConfigMap carries its text; the inference-perf image's python3 runs it,
so it imports nothing but the standard library), in front of inference-perf:

    python3 /cfg/start.py --ready-dir DIR --index K --count N [--reset URL ...] -- inference-perf --config_file ...

A rendezvous on the shared volume, so that the pods need no permission on the cluster's API: pod K, once its container
has started (its image pulled, the dataset on the volume), writes its clock reading into DIR/pod-K (written, then
renamed: a reader never sees half of it). When all N files are there every pod computes the same start time from the
same files (start_decision: the latest reading and a margin) and sleeps until then, so no pod's start depends on
when it happened to look. The margin covers how long the last file takes to be seen by every pod (the poll, and a
network file system's cached directory listing) and the offset between the nodes' clocks. Pod 0 empties the
engine's prefix cache (POST each --reset URL) before it writes its own file, so no pod starts before the cache is
empty however long the reset takes; where it cannot, it writes DIR/aborted and every pod exits 1. A pod that sees the
last file only after the start time starts at once and says how late; a pod that waits longer than --timeout for
the others exits 1 (a pod that is never scheduled would otherwise hold the rest forever).

DIR is per Job (its uid), so the files of an earlier replay never count for a new one.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import urllib.request
from typing import Mapping, NamedTuple, Optional, Sequence

__all__ = ["Decision", "main", "read_ready", "start_decision"]

READY_PREFIX = "pod-"
ABORTED = "aborted"  # written by pod 0 when it cannot empty the cache: no pod starts its load


class Decision(NamedTuple):
    action: str  # "wait", "start" (at `at`, epoch seconds) or "give up"
    at: Optional[float]
    missing: tuple[int, ...]  # the pods not ready yet


def start_decision(
    ready: Mapping[int, float], count: int, *, waited_s: float, margin_s: float, timeout_s: float
) -> Decision:
    """What a pod does, seeing `ready` (pod index: its clock when ready): start at the latest reading + margin once
    all `count` pods are ready (the same time for every pod that sees the same files), else wait, or give up once
    it has waited `timeout_s`. Indices outside 0..count-1 are not pods of this replay."""
    missing = tuple(k for k in range(count) if k not in ready)
    if not missing:
        return Decision("start", max(ready[k] for k in range(count)) + margin_s, ())
    return Decision("give up" if waited_s >= timeout_s else "wait", None, missing)


def read_ready(folder: str) -> dict[int, float]:
    """The readings in `folder` (pod-K files); a name or a text that is not one is left out."""
    found: dict[int, float] = {}
    try:
        names = os.listdir(folder)
    except FileNotFoundError:
        return found
    for name in names:
        index = name[len(READY_PREFIX) :]
        if not name.startswith(READY_PREFIX) or not index.isdigit():
            continue
        try:
            with open(os.path.join(folder, name), encoding="utf-8") as f:
                found[int(index)] = float(f.read().strip())
        except (OSError, ValueError):
            continue
    return found


def _write(folder: str, name: str, text: str) -> None:
    """Written, then renamed: a reader never sees half of it."""
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, name)
    with open(path + ".part", "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(path + ".part", path)


def _reset(urls: Sequence[str]) -> None:
    """POST each reset URL; an answer other than 2xx ends the pod (a replay that starts warm measures nothing)."""
    for url in urls:
        request = urllib.request.Request(url, data=b"", method="POST")
        try:
            with urllib.request.urlopen(request, timeout=120) as answer:
                print(f"start: reset {url}: HTTP {answer.status}", flush=True)
        except Exception as exc:  # noqa: BLE001 - any failure: the cache was not emptied
            raise SystemExit(
                f"start: cannot reset the cache at {url} ({exc}); export with the engine's --reset-url, or --no-reset"
            ) from None


def _args(argv: Sequence[str]) -> tuple[argparse.Namespace, list[str]]:
    argv = list(argv)
    command = argv[argv.index("--") + 1 :] if "--" in argv else []
    p = argparse.ArgumentParser(prog="start.py")
    p.add_argument("--ready-dir", required=True)
    p.add_argument("--index", type=int, required=True)
    p.add_argument("--count", type=int, required=True)
    p.add_argument("--margin", type=float, default=30.0)
    p.add_argument("--timeout", type=float, default=3600.0)
    p.add_argument("--poll", type=float, default=1.0)
    p.add_argument("--reset", action="append", default=[])
    args = p.parse_args(argv[: argv.index("--")] if "--" in argv else argv)
    return args, command


def main(argv: Sequence[str]) -> int:
    args, command = _args(argv)
    if args.index == 0:  # before pod 0 is ready: no pod starts its load until the cache is empty, however long it takes
        try:
            _reset(args.reset)
        except SystemExit:
            _write(args.ready_dir, ABORTED, "pod 0 could not empty the engine's cache")  # the others stop too
            raise
    began = time.time()
    _write(args.ready_dir, f"{READY_PREFIX}{args.index}", repr(began))
    while True:
        if os.path.exists(os.path.join(args.ready_dir, ABORTED)):
            print("start: pod 0 could not empty the engine's cache (its log says why); no load", flush=True)
            return 1
        decision = start_decision(
            read_ready(args.ready_dir),
            args.count,
            waited_s=time.time() - began,
            margin_s=args.margin,
            timeout_s=args.timeout,
        )
        if decision.action != "wait":
            break
        time.sleep(args.poll)
    if decision.at is None:
        print(f"start: pods {list(decision.missing)} not ready after {args.timeout:.0f} s; giving up", flush=True)
        return 1
    late = time.time() - decision.at
    print(
        f"start: all {args.count} pods ready; load starts at {decision.at:.3f} ({max(late, 0):.3f} s late)", flush=True
    )
    time.sleep(max(-late, 0.0))
    if not command:
        return 0
    os.execvp(command[0], command)
    return 1  # not reached: exec replaces this process


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
