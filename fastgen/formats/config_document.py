"""The inference-perf 0.7.0 config document, read and changed in one place: a typed view of the parsed YAML.

fastgen writes the document (generator.configs), then the bakeoff points it at a server and a report folder
(bakeoff.plan), the shards split its replay (bakeoff.shards), the Kubernetes export moves its paths into a pod
(export.kubernetes), and the read side reads back its load stage, seed and trace directory (analysis, results). Each of
them reads the sections through this view and changes them through its writers, so the document's shape is named
here only. The view wraps the parsed mapping itself (no copy): a writer changes it in place, keeping its keys' order,
so the YAML dumped from it is what the hand-written changes dumped.

A reader raises KeyError, IndexError or TypeError where the document lacks what it reads, as indexing the mapping
does: each caller says what that means in its own words.
"""

from __future__ import annotations

from typing import Any, Optional

__all__ = ["REMOTE_STORAGES", "ConfigDocument", "local_storage"]

REMOTE_STORAGES = ("google_cloud_storage", "simple_storage_service")  # the buckets inference-perf uploads reports to


def local_storage(path: str) -> dict:
    """A storage section that writes the reports into one local folder."""
    return {"local_storage": {"path": path}}


def _plain(section: Any) -> Any:
    """A section as the mapping it holds: inference-perf dumps its run's config with its objects' `__dict__`."""
    return section.get("__dict__", section)


class ConfigDocument:
    """The parsed config (`raw`, a mapping as yaml.safe_load gives it) read and changed by what it holds.

    `dumped`: the config inference-perf wrote beside its reports (objects dumped as their `__dict__`), whose data,
    replay and stage sections are read through to the mappings they hold."""

    def __init__(self, raw: Any, *, dumped: bool = False):
        self.raw = raw
        self._dumped = dumped

    def _open(self, section: Any) -> Any:
        return _plain(section) if self._dumped else section

    # -- where the sessions are: data.otel_trace_replay (formats.rows reads its source keys)
    @property
    def replay(self) -> dict:
        """The data.otel_trace_replay section: the sessions' source, the replay modes, labels, max_wait_ms."""
        return self._open(self._open(self.raw["data"])["otel_trace_replay"])

    @replay.setter
    def replay(self, section: dict) -> None:
        self.raw["data"]["otel_trace_replay"] = section

    @property
    def trace_directory(self) -> Any:
        """The trace directory the replay reads (as the config writes it), None where it reads a dataset file."""
        return self.replay.get("trace_directory")

    @property
    def reads_trace_directory(self) -> bool:
        return "trace_directory" in self.replay

    @property
    def dataset_files(self) -> str:
        """The one dataset file the replay reads (hf_dataset_path's data_files), as the config writes it."""
        return self.replay["hf_dataset_path"]["data_files"]

    @dataset_files.setter
    def dataset_files(self, files: str) -> None:
        self.replay["hf_dataset_path"]["data_files"] = files

    @property
    def local_dataset_file(self) -> Optional[str]:
        """The one local dataset file the replay reads (hf_dataset_path {path: json, data_files: FILE}), as the config
        writes it; None where it reads none (a trace directory, a hub dataset, several files)."""
        source = self.replay.get("hf_dataset_path")
        files = source.get("data_files") if isinstance(source, dict) and source.get("path") == "json" else None
        return files if isinstance(files, str) else None

    def read_dataset_file(self, files: str) -> None:
        """Replay the sessions of one local dataset file (`files`, as the config names it) instead of its source."""
        replay = self.replay
        replay.pop("trace_directory", None)
        replay["hf_dataset_path"] = {"path": "json", "data_files": files}

    # -- the load: load.stages, load.base_seed, load.num_workers
    @property
    def load(self) -> dict:
        return self.raw["load"]

    @property
    def stages(self) -> list:
        return self.raw["load"]["stages"]

    @property
    def stage(self) -> dict:
        """The first load stage (fastgen writes one): concurrent_sessions, num_sessions, session_rate."""
        return self._open(self.raw["load"]["stages"][0])

    @property
    def concurrent_sessions(self) -> Any:
        """The first stage's concurrent_sessions: the most sessions in flight at once (None where it sets none)."""
        return self.stage.get("concurrent_sessions")

    def hold_in_flight(self, sessions: int) -> None:
        """Replay with `sessions` sessions in flight: the first stage's concurrency, no arrival rate (a session
        starts as soon as one ends, so the load is the concurrency), and the workers' request cap scaled with it
        (fastgen sizes it as concurrency x requests a session)."""
        stage, was = self.stage, self.stage.get("concurrent_sessions")
        stage["concurrent_sessions"] = sessions
        stage.pop("session_rate", None)
        cap = self.raw["load"].get("worker_max_concurrency")
        if isinstance(cap, int) and isinstance(was, int) and was > 0:
            self.raw["load"]["worker_max_concurrency"] = max(sessions, -(-cap * sessions // was))

    @property
    def base_seed(self) -> Any:
        """load.base_seed: the seed of inference-perf's session shuffle (KeyError: none, picked by the clock)."""
        return self.raw["load"]["base_seed"]

    @base_seed.setter
    def base_seed(self, seed: int) -> None:
        self.raw["load"]["base_seed"] = seed

    def base_seed_or(self, default: int) -> Any:
        return self.raw["load"].get("base_seed", default)

    @property
    def num_workers(self) -> Any:
        """load.num_workers, None where it is not set (inference-perf then uses every CPU)."""
        return self.raw["load"].get("num_workers")

    @num_workers.setter
    def num_workers(self, workers: int) -> None:
        self.raw["load"]["num_workers"] = workers

    # -- the server and the tokenizer
    @property
    def server(self) -> dict:
        """The server section: type, base_url, model_name."""
        return self.raw["server"]

    @property
    def model_name(self) -> Any:
        return self.raw["server"]["model_name"]

    @property
    def server_type(self) -> Any:
        """server.type (the engine: vllm, sglang), None where the document names none."""
        return (self.raw.get("server") or {}).get("type")

    @property
    def base_url(self) -> Any:
        """server.base_url, None where the document names no server or URL."""
        return (self.raw.get("server") or {}).get("base_url")

    def point_at(self, base_url: str, engine: Optional[str] = None) -> None:
        """Send the requests to `base_url` (and name the engine's type); a document without a server gets one."""
        server = self.raw.setdefault("server", {})
        server["base_url"] = base_url
        if engine is not None:
            server["type"] = engine

    @property
    def tokenizer(self) -> dict:
        return self.raw["tokenizer"]

    @property
    def tokenizer_name(self) -> Any:
        """tokenizer.pretrained_model_name_or_path (a folder, relative to the config's, or a hub id); None: none."""
        return (self.raw.get("tokenizer") or {}).get("pretrained_model_name_or_path")

    @tokenizer_name.setter
    def tokenizer_name(self, name: str) -> None:
        self.raw["tokenizer"]["pretrained_model_name_or_path"] = name

    # -- the reports: storage
    @property
    def storage(self) -> dict:
        """The storage section, empty where there is none."""
        return self.raw.get("storage") or {}

    @storage.setter
    def storage(self, section: dict) -> None:
        self.raw["storage"] = section

    @property
    def local_report_path(self) -> str:
        """storage.local_storage.path: the reports' folder, relative to where inference-perf runs ({timestamp} in it
        stands for the run's start)."""
        return self.raw["storage"]["local_storage"]["path"]

    @local_report_path.setter
    def local_report_path(self, path: str) -> None:
        """Write the reports into `path`; the local storage's other keys and the remote storages stay."""
        storage = self.raw.setdefault("storage", {})
        local = dict(storage.get("local_storage") or {})
        local["path"] = path
        storage["local_storage"] = local

    def place_reports(self, local_path: str, remote_folder: str) -> None:
        """Write the local reports into `local_path` and each bucket's into `remote_folder` below its own path (the
        storages' other keys stay): a shard's reports apart from the others'."""
        storage = dict(self.storage)
        storage["local_storage"] = {**(storage.get("local_storage") or {}), "path": local_path}
        for key in REMOTE_STORAGES:
            if storage.get(key):
                remote = dict(storage[key])
                prefix = str(remote.get("path") or "").rstrip("/")
                remote["path"] = f"{prefix}/{remote_folder}" if prefix else remote_folder
                storage[key] = remote
        self.raw["storage"] = storage

    def set_report(self, section: dict) -> None:
        self.raw["report"] = section
