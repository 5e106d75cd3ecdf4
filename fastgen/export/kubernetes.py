"""One config's replay as a Kubernetes Indexed Job: N pods, each inference-perf 0.7.0 on its own shard (bakeoff/shards.py),
written as manifests a team applies with kubectl.

    OUT/volume.yaml   a PersistentVolumeClaim (ReadWriteMany) and a loader Job whose pod holds it while the dataset is
                      copied in (tar through kubectl exec) and, after the replay, while the reports are copied out
    OUT/replay.yaml   a ConfigMap with one key per shard (shard-K.yml, K = 0..N-1) and start.py (start_barrier.py),
                      and the Indexed Job (completionMode Indexed, completions = parallelism = N): pod K runs
                      `python3 /cfg/start.py ... -- inference-perf --config_file /cfg/shard-$(JOB_COMPLETION_INDEX).yml`
                      (every pod starts its load at one time, after all are ready; pod 0 empties the cache first)
    OUT/data/         what goes on the volume: shard-KK/ (each shard as `fastgen export shards` writes it: its dataset
                      file, its tokenizer folder, its config as written for a local run)
    OUT/run-config.yml  the config the shards were cut from: beside the collected reports, compare reads its load
    OUT/README.md     the kubectl steps, with this export's names, ending with the reports where compare reads them
                      as one run (collected_run)

The pods' resources, spread and securityContext: pods.py.

Why a volume and a loader rather than the inference-perf chart's dataset fetch (deploy/inference-perf: an init
container copies one file from a GCS or S3 bucket, gcsPath/s3Path, to a fixed name): the chart fetches one file to
one name for every pod, and the tokenizer folder the configs name is several files; it needs a bucket and the cloud
credentials to read it in the pod; a volume works on any cluster with a ReadWriteMany storage class, holds every
shard's file and the tokenizer once, and gives the pods somewhere to write local reports.

Inside a pod every path is absolute, so nothing depends on the working directory (a local shard config names its
dataset file relative to its folder):

    /cfg       the ConfigMap (read-only)           /data     the volume (read-only): data/ of OUT
    /reports   the volume's reports/ (read-write)  /cache    an emptyDir: HF_HOME, where datasets keeps its Arrow copy

A shard's dataset file becomes /data/shard-KK/FILE; its tokenizer folder /data/shard-KK/tokenizer (then
HF_HUB_OFFLINE=1: nothing is fetched from the hub; a hub id stays as it is); the local report folder
/reports/shard-KK, so the reports land on the volume beside each other; a GCS or S3 report path stays as the shard
config has it (already ending in shard-KK). With --base-url the server's URL is replaced (a config written for a
local run names localhost, which inside a pod is the pod).

The Job's backoffLimit is 0: a shard that fails is not run again, since a second run would replay its sessions
against a cache the first run filled. Pods wait in an init container until the dataset is marked loaded
(/data/.loaded), so the replay cannot start on a half-copied file.
"""

from __future__ import annotations

import copy
import json
import math
import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Optional, Sequence

import yaml

from ..engine_endpoints import ENGINES
from ..errors import OutputError, SpecError
from ..formats.config_document import ConfigDocument
from ..formats.manifest import MANIFEST_NAME, FileRecord, listed_record, record, rewrite_files
from ..formats.outdir import discard, open_staging, place_all
from ..formats.run_folder import RUN_CONFIG_FILE, repeat_name, shard_folder
from . import start_barrier
from .pods import SHELL_RESOURCES, container_security, pod_security, replay_resources, sized_resources, spread
from ..bakeoff.shards import SHARD_TOKENIZER, Shard, plan_shards, write_shards

__all__ = [
    "IMAGE",
    "KubernetesExport",
    "KubernetesOptions",
    "SHELL_IMAGE",
    "collected_run",
    "check_name",
    "config_key",
    "container_config",
    "default_name",
    "default_reset",
    "replay_manifests",
    "steps",
    "volume_gib",
    "volume_manifests",
    "write_kubernetes",
]

# inference-perf's chart (deploy/inference-perf/values.yaml) names the repository; its release workflow tags each
# image with the release's git tag (publish-on-release.yml: IMAGE_NAME:RELEASE_VERSION), v0.7.0 for 0.7.0
IMAGE = "quay.io/inference-perf/inference-perf:v0.7.0"
SHELL_IMAGE = "busybox:1.36"  # the loader and the wait: sh, tar, sleep (--shell-image)
CONFIG_MOUNT = "/cfg"  # the chart's mount point for its ConfigMap
DATA_MOUNT = "/data"
REPORTS_MOUNT = "/reports"
REPORTS_FOLDER = "reports"  # on the volume
CACHE_MOUNT = "/cache"
START_SCRIPT = "start.py"  # the ConfigMap's copy of start_barrier.py
START_FOLDER = ".start"  # under the reports: the barrier's readiness files, a folder per Job
LOADED = ".loaded"  # on the volume: the dataset is complete
DONE = ".done"  # on the volume: the reports were copied out, the loader may end
INDEX = "JOB_COMPLETION_INDEX"
JOB_UID = "JOB_UID"
CONFIGMAP_LIMIT = 1_000_000  # bytes: Kubernetes refuses a larger ConfigMap (1 MiB, with its keys and metadata)
NAME_MOST = 40  # the Job's name, so that `NAME-loader` and the pods' `NAME-K-xxxxx` stay valid DNS labels


@dataclass(frozen=True)
class KubernetesOptions:
    name: str  # the Job's name; the ConfigMap, the claim and the loader are named after it
    image: str = IMAGE
    namespace: Optional[str] = None  # None: kubectl's current namespace
    storage_class: Optional[str] = None  # None: the cluster's default class (it must offer ReadWriteMany)
    volume_gib: Optional[int] = None  # None: twice the data, and 1 GiB more, for the reports
    base_url: Optional[str] = None  # the server as the pods reach it; None: as the configs name it
    shell_image: str = SHELL_IMAGE
    cpu: Optional[float] = None  # the replay container's cores (requests = limits); None: sized (pods.py)
    memory_gib: Optional[int] = None  # its memory; None: sized (pods.py)
    start_margin_s: float = 30.0  # the barrier's margin (start_barrier.py)
    reset: tuple[str, ...] = ()  # URLs pod 0 POSTs before the start, to empty the engine's cache


@dataclass(frozen=True)
class KubernetesExport:
    out: Path
    shards: list[Shard]
    files: list[Path]  # what was written, relative to out
    data_bytes: int
    volume_gib: int


def default_name(config_path: Path) -> str:
    """`fastgen-<folder>-<config>` (fastgen-scenario1-c10) as a DNS label of at most NAME_MOST characters."""
    config_path = Path(config_path)
    return check_name(_label(f"fastgen-{config_path.parent.name}-{config_path.stem}"))


def _label(text: str) -> str:
    return re.sub(r"-+", "-", re.sub(r"[^a-z0-9-]", "-", text.lower()))[:NAME_MOST].strip("-")


def check_name(name: str) -> str:
    if not re.fullmatch(r"[a-z0-9]([a-z0-9-]*[a-z0-9])?", name) or len(name) > NAME_MOST:
        raise SpecError(
            f"--name {name!r} is not a Kubernetes name; give lower-case letters, digits and '-', at most {NAME_MOST}"
        )
    return name


def _names(options: KubernetesOptions) -> dict[str, str]:
    return {
        "job": options.name,
        "configs": f"{options.name}-configs",
        "claim": f"{options.name}-data",
        "loader": f"{options.name}-loader",
    }


def _metadata(name: str, options: KubernetesOptions, component: str) -> dict:
    meta: dict = {"name": name}
    if options.namespace:
        meta["namespace"] = options.namespace
    meta["labels"] = _labels(options, component)
    return meta


def _labels(options: KubernetesOptions, component: str) -> dict[str, str]:
    """component: "load" for the replay's pods (what the spread counts), "data" for the volume and its loader."""
    return {
        "app.kubernetes.io/name": "inference-perf",
        "app.kubernetes.io/part-of": "fastgen",
        "app.kubernetes.io/component": component,
        "fastgen/replay": options.name,
    }


def _is_local_tokenizer(config: dict) -> bool:
    """A shard names its copy of a tokenizer folder SHARD_TOKENIZER; a hub id stays as it was."""
    return ConfigDocument(config).tokenizer_name == SHARD_TOKENIZER


def container_config(shard: Shard, *, base_url: Optional[str] = None) -> dict:
    """The shard's config with every path as the pod sees it (module docstring)."""
    config = ConfigDocument(copy.deepcopy(shard.config))
    config.dataset_files = f"{DATA_MOUNT}/{shard_folder(shard.index)}/{PurePosixPath(config.dataset_files).name}"
    if _is_local_tokenizer(config.raw):
        folder = PurePosixPath(SHARD_TOKENIZER).name
        config.tokenizer_name = f"{DATA_MOUNT}/{shard_folder(shard.index)}/{folder}"
    if not config.num_workers:
        config.num_workers = SIZED_WORKERS  # what the pod was sized for
    config.local_report_path = f"{REPORTS_MOUNT}/{shard_folder(shard.index)}"
    if base_url:
        config.point_at(base_url)
    return config.raw


SIZED_WORKERS = 1  # written where a config names none: inference-perf's default is one a core of the node, not the pod


def default_reset(shard: Shard) -> tuple[str, ...]:
    """The reset endpoint of the engine the config names (server.type), at its base_url; () for another engine."""
    config = ConfigDocument(shard.config)
    engine = ENGINES.get(str(config.server_type))
    url = config.base_url
    return (f"{str(url).rstrip('/')}{engine.reset_path}",) if engine and url else ()


def config_key(index: int) -> str:
    """The ConfigMap key of shard `index`: the pod's $(JOB_COMPLETION_INDEX) as Kubernetes writes it (no padding)."""
    return f"shard-{index}.yml"


def _configmap(shards: Sequence[Shard], options: KubernetesOptions) -> dict:
    data = {
        config_key(s.index): yaml.safe_dump(
            container_config(s, base_url=options.base_url), sort_keys=False, allow_unicode=True
        )
        for s in shards
    }
    data[START_SCRIPT] = Path(start_barrier.__file__).read_text(encoding="utf-8")
    size = sum(len(k) + len(v.encode()) for k, v in data.items())
    if size > CONFIGMAP_LIMIT:
        raise SpecError(
            f"the {len(shards)} shard configs and {START_SCRIPT} are {size:,} bytes, more than a ConfigMap holds "
            f"(1 MiB); give fewer --shards"
        )
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": _metadata(_names(options)["configs"], options, "load"),
        "data": data,
    }


def _wait_for_dataset(options: KubernetesOptions) -> dict:
    return {
        "name": "wait-for-dataset",
        "image": options.shell_image,
        "command": [
            "sh",
            "-c",
            f"until [ -f {DATA_MOUNT}/{LOADED} ]; do echo 'waiting for the dataset ({DATA_MOUNT}/{LOADED})'; sleep 5; done",
        ],
        "volumeMounts": [{"name": "dataset", "mountPath": DATA_MOUNT, "readOnly": True}],
        "resources": SHELL_RESOURCES,
        "securityContext": container_security(),
    }


def _start_args(options: KubernetesOptions, count: int) -> list[str]:
    """start.py's arguments: the barrier (start_barrier.py), pod 0's reset, then inference-perf on the pod's shard."""
    args = ["--ready-dir", f"{REPORTS_MOUNT}/{START_FOLDER}/$({JOB_UID})", "--index", f"$({INDEX})"]
    args += ["--count", str(count), "--margin", f"{options.start_margin_s:g}"]
    for url in options.reset:
        args += ["--reset", url]
    return [*args, "--", "inference-perf", "--config_file", f"{CONFIG_MOUNT}/shard-$({INDEX}).yml"]


def _field(name: str, path: str) -> dict:
    return {"name": name, "valueFrom": {"fieldRef": {"fieldPath": path}}}


def _replay_container(options: KubernetesOptions, count: int, *, offline: bool, sized: tuple[int, int]) -> dict:
    env = [
        # declared here (the Job controller would add it too) so that $(JOB_COMPLETION_INDEX) in args is defined
        _field(INDEX, "metadata.annotations['batch.kubernetes.io/job-completion-index']"),
        # the Job's uid: the barrier's folder is this replay's, never an earlier one's
        _field(JOB_UID, "metadata.labels['controller-uid']"),
        {"name": "HF_HOME", "value": f"{CACHE_MOUNT}/huggingface"},
        {"name": "HOME", "value": CACHE_MOUNT},  # the pods' user has no home in the image
    ]
    if offline:
        env.append({"name": "HF_HUB_OFFLINE", "value": "1"})
    return {
        "name": "inference-perf",
        "image": options.image,
        "command": ["python3", f"{CONFIG_MOUNT}/{START_SCRIPT}"],
        "args": _start_args(options, count),
        "env": env,
        "resources": replay_resources(options.cpu, options.memory_gib, sized),
        "securityContext": container_security(),
        "volumeMounts": [
            {"name": "configs", "mountPath": CONFIG_MOUNT, "readOnly": True},
            {"name": "dataset", "mountPath": DATA_MOUNT, "readOnly": True},
            {"name": "dataset", "mountPath": REPORTS_MOUNT, "subPath": REPORTS_FOLDER},
            {"name": "cache", "mountPath": CACHE_MOUNT},
        ],
    }


def _replay_job(shards: Sequence[Shard], options: KubernetesOptions, dataset_bytes: int) -> dict:
    names = _names(options)
    count = len(shards)
    offline = all(_is_local_tokenizer(s.config) for s in shards)
    workers = max(int(ConfigDocument(s.config).num_workers or SIZED_WORKERS) for s in shards)
    sized = sized_resources(workers, dataset_bytes)
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": _metadata(names["job"], options, "load"),
        "spec": {
            "completionMode": "Indexed",
            "completions": count,
            "parallelism": count,
            "backoffLimit": 0,
            "template": {
                "metadata": {"labels": _labels(options, "load")},
                "spec": {
                    "restartPolicy": "Never",
                    "securityContext": pod_security(),
                    "topologySpreadConstraints": spread(_labels(options, "load")),
                    "initContainers": [_wait_for_dataset(options)],
                    "containers": [_replay_container(options, count, offline=offline, sized=sized)],
                    "volumes": [
                        {"name": "configs", "configMap": {"name": names["configs"]}},
                        {"name": "dataset", "persistentVolumeClaim": {"claimName": names["claim"]}},
                        {"name": "cache", "emptyDir": {}},
                    ],
                },
            },
        },
    }


def replay_manifests(shards: Sequence[Shard], options: KubernetesOptions, dataset_bytes: int = 0) -> list[dict]:
    """replay.yaml: the ConfigMap of the shards' configs and start.py, then the Indexed Job that runs them
    (dataset_bytes: the largest shard's dataset file, which sizes the pods' memory)."""
    if not shards:
        raise SpecError("no shards to run; give --shards 1 or more")
    return [_configmap(shards, options), _replay_job(shards, options, dataset_bytes)]


def volume_gib(data_bytes: int) -> int:
    """The claim's default size: the data twice over (the reports of a replay with per-request records are of the
    order of its prompts' text) and 1 GiB more."""
    return math.ceil(2 * data_bytes / 2**30) + 1


def volume_manifests(options: KubernetesOptions, gib: int) -> list[dict]:
    """volume.yaml: the claim, and the loader Job whose pod holds it until the reports were copied out."""
    names = _names(options)
    claim: dict = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": _metadata(names["claim"], options, "data"),
        "spec": {"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": f"{gib}Gi"}}},
    }
    if options.storage_class:
        claim["spec"]["storageClassName"] = options.storage_class
    hold = (
        f"mkdir -p {DATA_MOUNT}/{REPORTS_FOLDER}; "
        f"until [ -f {DATA_MOUNT}/{LOADED} ]; do sleep 5; done; echo dataset loaded; "
        f"until [ -f {DATA_MOUNT}/{DONE} ]; do sleep 5; done; echo reports collected"
    )
    loader = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": _metadata(names["loader"], options, "data"),
        "spec": {
            "backoffLimit": 0,
            "template": {
                "metadata": {"labels": _labels(options, "data")},
                "spec": {
                    "restartPolicy": "Never",
                    "securityContext": pod_security(),
                    "containers": [
                        {
                            "name": "loader",
                            "image": options.shell_image,
                            "command": ["sh", "-c", hold],
                            "volumeMounts": [{"name": "dataset", "mountPath": DATA_MOUNT}],
                            "resources": SHELL_RESOURCES,
                            "securityContext": container_security(),
                        }
                    ],
                    "volumes": [{"name": "dataset", "persistentVolumeClaim": {"claimName": names["claim"]}}],
                },
            },
        },
    }
    return [claim, loader]


RUN_CONFIG = RUN_CONFIG_FILE  # where compare reads a run's load level


def collected_run(config_path: Path) -> PurePosixPath:
    """Where the README puts the pods' reports: a run folder as `fastgen bakeoff` lays it out
    (LABEL/<scenario>/<config>/repeat-1/shards/shard-KK/, run-config.yml beside shards/), so that `fastgen compare`
    reads the shards as one run of the config, and pairs it with another server's run of the same config."""
    config_path = Path(config_path)
    return PurePosixPath("results", "$LABEL", config_path.parent.name, config_path.stem, repeat_name(1))


def steps(options: KubernetesOptions, count: int, run: PurePosixPath) -> str:
    """README.md of an export: the kubectl steps, run from the export's folder."""
    names = _names(options)
    ns = f" -n {options.namespace}" if options.namespace else ""
    loader = f"kubectl{ns} exec -i job/{names['loader']} --"
    reset = (
        f"Pod 0 empties the engine's prefix cache before the start (POST {', '.join(options.reset)}; not verified "
        f"with a probe as `fastgen bakeoff` does)."
        if options.reset
        else "Nothing empties the engine's prefix cache (--no-reset, or a server.type whose reset fastgen does not know):"
        " empty it before applying replay.yaml."
    )
    return f"""# {names["job"]}: {count} inference-perf pods, one shard each (fastgen export kubernetes)

Run from this folder, with kubectl pointed at the cluster; set LABEL to a name for this server's runs (as
`fastgen bakeoff --label`).

```
LABEL=my-server
kubectl{ns} apply -f volume.yaml
kubectl{ns} wait --for=jsonpath='{{.status.ready}}'=1 job/{names["loader"]} --timeout=10m
tar -C data -cf - . | {loader} tar -xf - -C {DATA_MOUNT}
{loader} touch {DATA_MOUNT}/{LOADED}
kubectl{ns} apply -f replay.yaml
kubectl{ns} wait --for=condition=Complete job/{names["job"]} --timeout=24h
mkdir -p {run}/shards && cp {RUN_CONFIG} {run}/
{loader} sh -c 'cd {DATA_MOUNT}/{REPORTS_FOLDER} && tar -cf - shard-*' | tar -xf - -C {run}/shards
{loader} touch {DATA_MOUNT}/{DONE}
fastgen compare results/$LABEL results/OTHER --out report
```

Pod K (0..{count - 1}) runs ConfigMap key shard-K.yml: the sessions in data/shard-KK (K in two digits), its
reports into {run}/shards/shard-KK, which `fastgen compare` reads as one run of the config (every shard's records
merged; {RUN_CONFIG} gives its load). The pods wait until {DATA_MOUNT}/{LOADED} exists, then until all {count} are
ready; each starts its load at the same time, {options.start_margin_s:g} s after the last one was ready. {reset}
A failed shard is not retried (backoffLimit 0): rerun the whole replay (`kubectl delete -f replay.yaml`, then apply
it again) against a freshly started server. Remove everything with
`kubectl{ns} delete -f replay.yaml -f volume.yaml`.
"""


class _Dumper(yaml.SafeDumper):
    """Multi-line strings (the ConfigMap's configs) as literal blocks: the configs read in replay.yaml as in a file."""


def _text(dumper: yaml.SafeDumper, text: str) -> yaml.ScalarNode:
    return dumper.represent_scalar("tag:yaml.org,2002:str", text, style="|" if "\n" in text else None)


_Dumper.add_representer(str, _text)


def _dump(documents: list[dict]) -> str:
    return yaml.dump_all(documents, Dumper=_Dumper, sort_keys=False, allow_unicode=True)


def write_kubernetes(config_path: Path, count: int, out_dir: Path, options: KubernetesOptions) -> KubernetesExport:
    """The config's replay in `count` shards as an export folder (module docstring). All or nothing: on any error
    out_dir is left as it was (a previous export in it is replaced whole)."""
    config_path = Path(config_path)
    shards = plan_shards(config_path, count, base_url=options.base_url)  # bad input ends here, before any writing
    replay_manifests(shards, options)
    staging = open_staging(Path(out_dir), option="--out")
    try:
        data = staging.folder / "data"
        paths = write_shards(config_path, count, data, base_url=options.base_url)
        data_bytes = sum(p.stat().st_size for p in data.rglob("*") if p.is_file())
        gib = options.volume_gib or volume_gib(data_bytes)
        rows = max(_dataset_bytes(path) for path in paths)
        texts = {
            "replay.yaml": _dump(replay_manifests(shards, options, rows)),
            "volume.yaml": _dump(volume_manifests(options, gib)),
            "README.md": steps(options, count, collected_run(config_path)),
            RUN_CONFIG: config_path.read_text(encoding="utf-8"),
        }
        for name, text in texts.items():
            (staging.folder / name).write_text(text, encoding="utf-8")
        records = [record(name, text.encode()) for name, text in texts.items()] + _data_records(data)
        rewrite_files(staging.folder, {"generator": "fastgen", "export": "kubernetes"}, records)
        place_all([staging])
    except OSError as exc:
        discard(staging)
        raise OutputError(f"cannot write {out_dir} ({exc.strerror or exc}); choose another --out") from None
    except BaseException:
        discard(staging)
        raise
    return KubernetesExport(staging.out, shards, sorted(Path(r.path) for r in records), data_bytes, gib)


def _dataset_bytes(config: Path) -> int:
    """The size of the dataset file a written shard's config names (relative to its folder)."""
    document = ConfigDocument(yaml.safe_load(config.read_text(encoding="utf-8")))
    return (config.parent / document.dataset_files).stat().st_size


def _data_records(data: Path) -> list[FileRecord]:
    """data/'s files for the export's manifest: the shards' files as their own manifest lists them (a dataset file is
    gigabytes: not hashed again), the tokenizer's and that manifest by their bytes."""
    try:
        listed = json.loads((data / MANIFEST_NAME).read_bytes()).get("files", {})
    except (OSError, ValueError):
        listed = {}
    records = []
    for path in sorted(p for p in data.rglob("*") if p.is_file()):
        rel = path.relative_to(data).as_posix()
        if rel in listed:
            found = listed_record(rel, listed[rel], data / MANIFEST_NAME)
            records.append(FileRecord(f"data/{rel}", found.size, found.digest))
        else:
            records.append(record(f"data/{rel}", path.read_bytes()))
    return records
