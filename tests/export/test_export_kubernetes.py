"""`fastgen export kubernetes`: one config's replay as an Indexed Job of shard pods, checked offline against
Kubernetes' own schemas (kubernetes-validate's bundled OpenAPI schemas, strict: an unknown field fails), and each pod
followed as Kubernetes would start it: its index, the ConfigMap key it reads, inference-perf 0.7.0's own config
loader, and the files its paths name on the volume."""

from __future__ import annotations

import copy
import json
import shutil
import socket
from pathlib import Path, PurePosixPath

import kubernetes_validate
import pytest
import yaml
from inference_perf.config import read_config
from kubernetes_validate.utils import all_versions

from fastgen.cli import main
from fastgen.errors import OutputError, SpecError
from fastgen.export.kubernetes import (
    IMAGE,
    KubernetesOptions,
    collected_run,
    container_config,
    default_name,
    replay_manifests,
    write_kubernetes,
)
from fastgen.export.pods import sized_resources
from fastgen.bakeoff.shards import Shard, plan_shards

CONFIG = "scenario3/c100_stable.yml"  # 20 sessions in the small set
SHARDS = 3
# the oldest and the newest Kubernetes whose schemas kubernetes-validate bundles (Indexed Jobs are GA since 1.24)
VERSIONS = (all_versions()[0], all_versions()[-1])


@pytest.fixture(scope="module")
def exported(small_dataset, tmp_path_factory):
    out = tmp_path_factory.mktemp("k8s") / "replay"
    config = small_dataset / "configs" / CONFIG
    options = KubernetesOptions(name=default_name(config), namespace="bench", storage_class="nfs")
    export = write_kubernetes(config, SHARDS, out, options)
    docs = {name: list(yaml.safe_load_all((out / name).read_text())) for name in ("replay.yaml", "volume.yaml")}
    return config, export, docs


def _kinds(docs: dict) -> dict[str, dict]:
    every = [d for name in ("volume.yaml", "replay.yaml") for d in docs[name]]
    return {f"{d['kind']}/{d['metadata']['name']}": d for d in every}


def test_default_name_is_a_dns_label_from_the_config_path():
    assert default_name(Path("configs/scenario3/c100_stable.yml")) == "fastgen-scenario3-c100-stable"


def test_write_kubernetes_writes_the_volume_the_loader_the_configmap_and_the_indexed_job(exported):
    _, export, docs = exported
    assert sorted(_kinds(docs)) == [
        "ConfigMap/fastgen-scenario3-c100-stable-configs",
        "Job/fastgen-scenario3-c100-stable",
        "Job/fastgen-scenario3-c100-stable-loader",
        "PersistentVolumeClaim/fastgen-scenario3-c100-stable-data",
    ]
    job = _kinds(docs)["Job/fastgen-scenario3-c100-stable"]
    assert job["spec"]["completionMode"] == "Indexed"
    assert job["spec"]["completions"] == job["spec"]["parallelism"] == SHARDS
    assert (
        job["spec"]["template"]["spec"]["containers"][0]["image"]
        == IMAGE
        == ("quay.io/inference-perf/inference-perf:v0.7.0")
    )
    claim = _kinds(docs)["PersistentVolumeClaim/fastgen-scenario3-c100-stable-data"]
    assert claim["spec"]["storageClassName"] == "nfs" and claim["spec"]["accessModes"] == ["ReadWriteMany"]
    assert all(d["metadata"]["namespace"] == "bench" for d in _kinds(docs).values())
    # the manifest lists every file, so that a second export into the same folder replaces this one
    listed = set(json.loads((export.out / "manifest.json").read_text())["files"])
    assert listed == {p.relative_to(export.out).as_posix() for p in export.out.rglob("*") if p.is_file()} - {
        "manifest.json"
    }


@pytest.mark.parametrize("version", VERSIONS)
def test_every_manifest_validates_against_the_kubernetes_schemas(exported, version):
    _, _, docs = exported
    for doc in _kinds(docs).values():
        kubernetes_validate.validate(doc, version, strict=True)  # raises on a wrong field or type


@pytest.mark.parametrize(
    "break_it",
    [
        lambda job: job["spec"].update(completionsMode="Indexed"),  # a misspelt field
        lambda job: job["spec"].update(completions=str(job["spec"]["completions"])),  # a count as a string
        lambda job: job["spec"]["template"]["spec"]["containers"][0].update(configFile="/cfg/x.yml"),
        lambda job: job["spec"]["template"]["spec"]["volumes"][1].update(pvc={"claimName": "x"}),
    ],
    ids=["misspelt", "string-count", "unknown-container-field", "unknown-volume-source"],
)
def test_the_schema_check_refuses_a_broken_job(exported, break_it):
    """The validation above can fail: the same Job with one wrong field does."""
    _, _, docs = exported
    job = copy.deepcopy(_kinds(docs)["Job/fastgen-scenario3-c100-stable"])
    break_it(job)
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(job, VERSIONS[-1], strict=True)


def test_the_schema_check_needs_no_network(exported, monkeypatch):
    """kubernetes-validate reads the schemas it bundles: with every connection refused it validates the same."""

    def refuse(*args, **kwargs):
        raise OSError("no network in this test")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    _, _, docs = exported
    for doc in _kinds(docs).values():
        kubernetes_validate.validate(doc, VERSIONS[-1], strict=True)


def _pod(job: dict, index: int, uid: str = "0a1b") -> dict:
    """The container of pod `index` as Kubernetes starts it: the annotation and the label the Job controller sets,
    the env it defines from them, and $(VAR) in args expanded from that env."""
    container = job["spec"]["template"]["spec"]["containers"][0]
    fields = {
        "metadata.annotations['batch.kubernetes.io/job-completion-index']": str(index),
        "metadata.labels['controller-uid']": uid,
    }
    env = {}
    for var in container["env"]:
        if "value" in var:
            env[var["name"]] = var["value"]
        else:
            env[var["name"]] = fields[var["valueFrom"]["fieldRef"]["fieldPath"]]
    args = list(container["args"])
    for name, value in env.items():
        args = [a.replace(f"$({name})", value) for a in args]
    return {"args": args, "env": env, "mounts": container["volumeMounts"]}


def _mount_of(mounts: list[dict], path: str) -> tuple[dict, str]:
    """The mount a container path is under, and the path inside it."""
    mount = max(
        (m for m in mounts if path.startswith(m["mountPath"].rstrip("/") + "/")), key=lambda m: len(m["mountPath"])
    )
    return mount, path[len(mount["mountPath"]) :].lstrip("/")


def test_each_pod_index_runs_its_own_shard_config_and_inference_perf_loads_it(exported, tmp_path):
    config, export, docs = exported
    kinds = _kinds(docs)
    job = kinds["Job/fastgen-scenario3-c100-stable"]
    configmap = kinds["ConfigMap/fastgen-scenario3-c100-stable-configs"]
    volumes = {v["name"]: v for v in job["spec"]["template"]["spec"]["volumes"]}
    seen = {}
    for index in range(job["spec"]["completions"]):
        pod = _pod(job, index)
        assert pod["env"]["JOB_COMPLETION_INDEX"] == str(index)
        config_file = pod["args"][pod["args"].index("--config_file") + 1]
        mount, key = _mount_of(pod["mounts"], config_file)
        assert volumes[mount["name"]]["configMap"]["name"] == configmap["metadata"]["name"]
        text = configmap["data"][key]
        local = tmp_path / f"pod-{index}.yml"
        local.write_text(text)
        loaded = read_config(str(local))  # inference-perf 0.7.0's own config model
        seen[key] = (pod, loaded, yaml.safe_load(text))
    assert len(seen) == SHARDS  # N pods, N distinct configs
    sources = [parsed["data"]["otel_trace_replay"]["hf_dataset_path"]["data_files"] for _, _, parsed in seen.values()]
    assert len(set(sources)) == SHARDS
    reports = [parsed["storage"]["local_storage"]["path"] for _, _, parsed in seen.values()]
    assert len(set(reports)) == SHARDS
    assert [loaded.load.base_seed for _, loaded, _ in seen.values()] == [
        s.config["load"]["base_seed"] for s in export.shards
    ]


def _on_volume(export, pod: dict, path: str) -> Path:
    """The file a pod's path names, in the export's data/ folder (what the loader copies onto the volume)."""
    mount, inside = _mount_of(pod["mounts"], path)
    assert mount["name"] == "dataset", f"{path} is not on the volume"
    return export.out / "data" / mount.get("subPath", "") / inside


def _session_ids(path: Path) -> list[str]:
    return [json.loads(line)["session_id"] for line in path.read_text().splitlines()]


def test_the_pods_replay_disjoint_sessions_that_together_are_the_configs(exported):
    config, export, docs = exported
    job = _kinds(docs)["Job/fastgen-scenario3-c100-stable"]
    configmap = _kinds(docs)["ConfigMap/fastgen-scenario3-c100-stable-configs"]
    per_pod = []
    for index in range(SHARDS):
        pod = _pod(job, index)
        text = configmap["data"][f"shard-{index}.yml"]
        parsed = yaml.safe_load(text)
        dataset = _on_volume(export, pod, parsed["data"]["otel_trace_replay"]["hf_dataset_path"]["data_files"])
        assert dataset.is_file()
        ids = _session_ids(dataset)
        assert len(ids) == parsed["load"]["stages"][0]["num_sessions"]
        per_pod.append(set(ids))
    assert sum(len(ids) for ids in per_pod) == len(set().union(*per_pod))  # disjoint
    slots = [set(s.slots) for s in export.shards]
    assert sum(len(s) for s in slots) == len(set().union(*slots))
    plan = plan_shards(config, 1)[0]
    assert set().union(*slots) == set(plan.slots)  # together: the config's own sessions


def test_every_path_in_a_pod_config_is_absolute_and_on_a_mount(exported):
    _, export, docs = exported
    job = _kinds(docs)["Job/fastgen-scenario3-c100-stable"]
    configmap = _kinds(docs)["ConfigMap/fastgen-scenario3-c100-stable-configs"]
    for index in range(SHARDS):
        pod = _pod(job, index)
        parsed = yaml.safe_load(configmap["data"][f"shard-{index}.yml"])
        tokenizer = parsed["tokenizer"]["pretrained_model_name_or_path"]
        assert (_on_volume(export, pod, tokenizer) / "tokenizer.json").is_file()
        assert pod["env"]["HF_HUB_OFFLINE"] == "1"  # the tokenizer is on the volume: nothing from the hub
        report = parsed["storage"]["local_storage"]["path"]
        mount, inside = _mount_of(pod["mounts"], report)
        assert not mount.get("readOnly") and mount["subPath"] == "reports" and inside == f"shard-{index:02d}"
        dataset_mount, _ = _mount_of(
            pod["mounts"], parsed["data"]["otel_trace_replay"]["hf_dataset_path"]["data_files"]
        )
        assert dataset_mount["readOnly"] is True


def _shard(config: dict, index: int = 0) -> Shard:
    return Shard(index, 2, (index,), config)


def _config(**overrides) -> dict:
    config = {
        "server": {"base_url": "http://localhost:8000"},
        "data": {"otel_trace_replay": {"hf_dataset_path": {"path": "json", "data_files": "scenario1.jsonl"}}},
        "load": {"base_seed": 42000, "stages": [{"num_sessions": 1}]},
        "tokenizer": {"pretrained_model_name_or_path": "Qwen/Qwen3-32B"},
        "storage": {
            "local_storage": {"path": "/home/me/reports/c10/shard-01"},
            "google_cloud_storage": {"bucket_name": "b", "path": "runs/c10/shard-01"},
        },
    }
    config.update(overrides)
    return config


def test_container_config_keeps_a_hub_tokenizer_and_a_bucket_path_and_sets_the_base_url():
    got = container_config(_shard(_config(), 1), base_url="http://vllm.serving.svc:8000")
    assert got["tokenizer"]["pretrained_model_name_or_path"] == "Qwen/Qwen3-32B"
    assert got["storage"]["google_cloud_storage"]["path"] == "runs/c10/shard-01"
    assert got["storage"]["local_storage"]["path"] == "/reports/shard-01"
    assert got["data"]["otel_trace_replay"]["hf_dataset_path"]["data_files"] == "/data/shard-01/scenario1.jsonl"
    assert got["server"]["base_url"] == "http://vllm.serving.svc:8000"


def test_a_hub_tokenizer_leaves_the_pods_online():
    job = replay_manifests([_shard(_config())], KubernetesOptions(name="x"))[1]
    env = {v["name"] for v in job["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert "HF_HUB_OFFLINE" not in env


def test_more_configs_than_a_configmap_holds_is_refused():
    big = _config(padding="x" * 400_000)
    with pytest.raises(SpecError, match="ConfigMap"):
        replay_manifests([_shard(big, k) for k in range(3)], KubernetesOptions(name="x"))


def test_write_kubernetes_leaves_a_folder_with_a_users_files_as_it_was(small_dataset, tmp_path):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep")
    with pytest.raises(OutputError, match="--out"):
        write_kubernetes(small_dataset / "configs" / CONFIG, 2, mine, KubernetesOptions(name="x"))
    assert sorted(p.name for p in mine.iterdir()) == ["notes.txt"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine"]  # no staging folder left beside it


def _run(args: list[str]) -> int:
    """fastgen's exit code: argparse's errors end in SystemExit, fastgen's own in main's return."""
    try:
        return main(args)
    except SystemExit as exc:
        return int(exc.code or 0)


@pytest.mark.parametrize("shards", ["0", "21"])
def test_cli_bad_shard_count_is_one_line_and_writes_nothing(small_dataset, tmp_path, capsys, shards):
    out = tmp_path / "out"
    code = _run(
        ["export", "kubernetes", str(small_dataset / "configs" / CONFIG), "--shards", shards, "--out", str(out)]
    )
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and "--shards" in err, err
    assert not out.exists() and list(tmp_path.iterdir()) == []


def test_cli_kubernetes_options_belong_to_kubernetes(small_dataset, tmp_path, capsys):
    code = _run(["export", "mooncake", str(small_dataset / "traces"), "--shards", "2", "--out", str(tmp_path / "x")])
    assert code == 2 and "--shards is for `fastgen export shards CONFIG`" in capsys.readouterr().err
    config, out = str(small_dataset / "configs" / CONFIG), tmp_path / "shards"
    assert _run(["export", "shards", config, "--shards", "2", "--image", "x", "--out", str(out)]) == 2
    assert "--image is for fastgen export kubernetes, not shards" in capsys.readouterr().err and not out.exists()


def test_cli_writes_the_export_and_names_its_steps(small_dataset, tmp_path, capsys):
    out = tmp_path / "k8s"
    config = small_dataset / "configs" / CONFIG
    args = ["export", "kubernetes", str(config), "--shards", "2", "--out", str(out), "--name", "c100", "--base-url"]
    assert (
        main(
            [
                *args,
                "http://vllm:8000",
                "--shell-image",
                "mirror.local/busybox:1.36",
                "--cpu",
                "2.5",
                "--start-margin",
                "5",
            ]
        )
        == 0
    )
    assert "README.md" in capsys.readouterr().out
    readme = (out / "README.md").read_text()
    assert "kubectl apply -f volume.yaml" in readme and "job/c100-loader" in readme
    job = list(yaml.safe_load_all((out / "replay.yaml").read_text()))[1]
    assert job["metadata"]["name"] == "c100" and job["spec"]["completions"] == 2
    configs = list(yaml.safe_load_all((out / "replay.yaml").read_text()))[0]["data"]
    shard_configs = [yaml.safe_load(t) for k, t in configs.items() if k.startswith("shard-")]
    assert len(shard_configs) == 2 and {c["server"]["base_url"] for c in shard_configs} == {"http://vllm:8000"}
    assert PurePosixPath(
        yaml.safe_load(configs["shard-1.yml"])["tokenizer"]["pretrained_model_name_or_path"]
    ).is_absolute()
    spec = job["spec"]["template"]["spec"]
    assert spec["initContainers"][0]["image"] == "mirror.local/busybox:1.36"
    assert spec["containers"][0]["resources"]["limits"]["cpu"] == "2.5"
    # the engine the config names (vLLM), reset at the URL the pods reach: pod 0 posts it before the start
    args = spec["containers"][0]["args"]
    assert args[args.index("--reset") + 1] == "http://vllm:8000/reset_prefix_cache"
    assert args[args.index("--margin") + 1] == "5"


def _pod_specs(docs: dict) -> dict[str, dict]:
    kinds = _kinds(docs)
    return {
        name: kinds[f"Job/{name}"]["spec"]["template"]
        for name in ("fastgen-scenario3-c100-stable", "fastgen-scenario3-c100-stable-loader")
    }


def test_every_container_meets_the_restricted_pod_security_profile(exported):
    """The restricted profile's rules (Pod Security Standards), on every container, init containers included."""
    _, _, docs = exported
    for template in _pod_specs(docs).values():
        spec = template["spec"]
        assert spec["securityContext"]["runAsNonRoot"] is True and spec["securityContext"]["runAsUser"] > 0
        containers = spec.get("initContainers", []) + spec["containers"]
        assert containers
        for container in containers:
            context = container["securityContext"]
            assert context["allowPrivilegeEscalation"] is False
            assert context["capabilities"]["drop"] == ["ALL"] and "add" not in context["capabilities"]
            assert context["seccompProfile"]["type"] == "RuntimeDefault" and context["runAsNonRoot"] is True
            assert set(container["resources"]) == {"requests", "limits"}
        volumes = {next(k for k in v if k != "name") for v in spec["volumes"]}
        assert volumes <= {"configMap", "emptyDir", "persistentVolumeClaim"}  # the profile's allowed types


def test_the_load_pods_spread_over_nodes_and_are_sized_from_their_shard(exported):
    config, export, docs = exported
    template = _pod_specs(docs)["fastgen-scenario3-c100-stable"]
    (constraint,) = template["spec"]["topologySpreadConstraints"]
    assert constraint["topologyKey"] == "kubernetes.io/hostname" and constraint["whenUnsatisfiable"] == "DoNotSchedule"
    selector = constraint["labelSelector"]["matchLabels"]
    assert selector.items() <= template["metadata"]["labels"].items()  # it counts the load pods
    loader = _pod_specs(docs)["fastgen-scenario3-c100-stable-loader"]
    assert not selector.items() <= loader["metadata"]["labels"].items()  # and not the loader's
    workers = yaml.safe_load(config.read_text())["load"]["num_workers"]
    largest = max(
        (export.out / "data" / s.name / s.config["data"]["otel_trace_replay"]["hf_dataset_path"]["data_files"])
        .stat()
        .st_size
        for s in export.shards
    )
    resources = template["spec"]["containers"][0]["resources"]
    cores, gib = sized_resources(workers, largest)
    assert resources["requests"] == resources["limits"] == {"cpu": str(cores), "memory": f"{gib}Gi"}


def test_the_load_pods_start_through_the_barrier_in_a_folder_of_their_own_job(exported):
    _, _, docs = exported
    job = _kinds(docs)["Job/fastgen-scenario3-c100-stable"]
    configmap = _kinds(docs)["ConfigMap/fastgen-scenario3-c100-stable-configs"]
    pod = _pod(job, 2, uid="uid-7")
    assert pod["args"][:8] == ["--ready-dir", "/reports/.start/uid-7", "--index", "2", "--count", "3", "--margin", "30"]
    assert pod["args"][pod["args"].index("--") + 1 :] == ["inference-perf", "--config_file", "/cfg/shard-2.yml"]
    container = job["spec"]["template"]["spec"]["containers"][0]
    script = container["command"][1]
    mount, key = _mount_of(pod["mounts"], script)
    assert container["command"][0] == "python3" and configmap["data"][key].startswith('"""The common start')


def _reports(folder: Path, session: str) -> None:
    """What one pod's inference-perf writes: a session of two requests."""
    folder.mkdir(parents=True)
    requests = [
        {
            "start_time": float(turn),
            "end_time": turn + 1.0,
            "error": None,
            "info": {"labels": {"session": session, "turn": str(turn)}},
            "computed_metrics": {"output_tokens": 5},
        }
        for turn in range(2)
    ]
    sessions = [{"session_id": f"trace0_{session}", "success": True, "error": None, "num_events": 2}]
    sessions[0].update(start_time=0.0, end_time=2.0)
    (folder / "per_request_lifecycle_metrics.json").write_text(json.dumps(requests))
    (folder / "per_session_lifecycle_metrics.json").write_text(json.dumps(sessions))


def test_the_readme_collects_the_pods_reports_where_compare_reads_them_as_one_run(exported, tmp_path):
    """The pods' reports (the volume's reports/shard-KK), collected as the README says, are one run of the config
    for compare's reader, its load read from run-config.yml, paired by name with a bakeoff's run of the config."""
    from fastgen.results.runs import read_runs

    config, export, _ = exported
    run = collected_run(config)
    readme = (export.out / "README.md").read_text()
    assert f"mkdir -p {run}/shards && cp run-config.yml {run}/" in readme
    assert f"tar -xf - -C {run}/shards" in readme and "tar -cf - shard-*" in readme
    results = tmp_path / PurePosixPath(run).relative_to("results").as_posix().replace("$LABEL", "vllm-k8s")
    for k in range(SHARDS):
        _reports(results / "shards" / f"shard-{k:02d}", f"s{k}")
    (results / "run-config.yml").write_bytes((export.out / "run-config.yml").read_bytes())
    runs, problems = read_runs(tmp_path / "vllm-k8s")
    assert list(runs) == ["scenario3/c100_stable"], problems
    (repeat,) = runs["scenario3/c100_stable"].repeats
    assert sorted((r.session, r.turn) for r in repeat.requests) == [(f"s{k}", t) for k in range(SHARDS) for t in (0, 1)]
    stage = yaml.safe_load(config.read_text())["load"]["stages"][0]
    assert runs["scenario3/c100_stable"].concurrency == stage["concurrent_sessions"]
    # and `fastgen compare` itself: one row for the config, every shard's requests in it
    shutil.copytree(tmp_path / "vllm-k8s", tmp_path / "other")
    assert main(["compare", str(tmp_path / "vllm-k8s"), str(tmp_path / "other"), "--out", str(tmp_path / "r")]) == 0
    report = json.loads((tmp_path / "r" / "report.json").read_text())
    table = next(s for s in report["sections"] if s["id"] == "runs")["tables"][0]
    (row,) = [dict(zip(table["columns"], r)) for r in table["rows"]]
    assert row["config"] == "scenario3/c100_stable" and row["requests A"] == row["requests B"] == 2 * SHARDS


@pytest.mark.parametrize(
    ("given", "resets"),
    [
        (["--no-reset"], []),
        (
            [
                "--reset-url",
                "http://vllm-0:8000/reset_prefix_cache",
                "--reset-url",
                "http://vllm-1:8000/reset_prefix_cache",
            ],
            ["http://vllm-0:8000/reset_prefix_cache", "http://vllm-1:8000/reset_prefix_cache"],
        ),
    ],
    ids=["no-reset", "each-replica"],
)
def test_cli_reset_options_name_what_pod_0_posts(small_dataset, tmp_path, given, resets):
    out = tmp_path / "k8s"
    args = ["export", "kubernetes", str(small_dataset / "configs" / CONFIG), "--shards", "2", "--out", str(out)]
    assert main([*args, "--base-url", "http://router:8000", *given]) == 0
    job = list(yaml.safe_load_all((out / "replay.yaml").read_text()))[1]
    container_args = job["spec"]["template"]["spec"]["containers"][0]["args"]
    assert [container_args[i + 1] for i, a in enumerate(container_args) if a == "--reset"] == resets


def test_cli_refuses_no_reset_beside_a_reset_url(small_dataset, tmp_path, capsys):
    out = tmp_path / "k8s"
    args = ["export", "kubernetes", str(small_dataset / "configs" / CONFIG), "--shards", "2", "--out", str(out)]
    assert _run([*args, "--no-reset", "--reset-url", "http://x/reset"]) == 2
    assert "--no-reset and --reset-url" in capsys.readouterr().err and not out.exists()


def test_cli_warns_when_the_pods_would_call_localhost(small_dataset, tmp_path, capsys):
    """A generated config names localhost:8000, which inside a pod is the pod itself."""
    args = ["export", "kubernetes", str(small_dataset / "configs" / CONFIG), "--shards", "2", "--out"]
    assert main([*args, str(tmp_path / "a")]) == 0
    assert "give --base-url" in capsys.readouterr().err
    assert main([*args, str(tmp_path / "b"), "--base-url", "http://vllm.serving.svc:8000"]) == 0
    assert "warning" not in capsys.readouterr().err


def test_a_config_without_num_workers_runs_the_workers_its_pod_was_sized_for():
    from fastgen.export.kubernetes import SIZED_WORKERS, container_config
    from fastgen.bakeoff.shards import Shard

    replay = {"otel_trace_replay": {"hf_dataset_path": {"path": "json", "data_files": "rows.jsonl"}}}
    unsized = container_config(Shard(0, 1, (0,), {"load": {"stages": [{}]}, "data": replay}))
    assert unsized["load"]["num_workers"] == SIZED_WORKERS  # not inference-perf's default: every core of the node
    sized = container_config(Shard(0, 1, (0,), {"load": {"stages": [{}], "num_workers": 6}, "data": replay}))
    assert sized["load"]["num_workers"] == 6
