"""Read what inference-perf 0.7.0 wrote: the session lifecycle reports of a run's single stage.

inference-perf writes into `storage.local_storage.path` with `{timestamp}` filled in (`%Y%m%d-%H%M%S`):
`per_session_lifecycle_metrics.json` (one object per session: file_path, num_events, success, total_input_tokens,
total_cached_tokens, ...) and `stage_0_session_lifecycle_metrics.json` (stage status and the pooled
`kv_cache_hit_percent`).
"""

from __future__ import annotations

import glob
import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from fastgen.formats.config_document import ConfigDocument
from fastgen.formats.rows import trace_dir_of
from fastgen.formats.run_folder import PER_SESSION_FILE as PER_SESSION

__all__ = ["SessionReports", "clear_reports", "report_glob", "read_reports"]

STAGE = "stage_0_session_lifecycle_metrics.json"


@dataclass(frozen=True)
class SessionReports:
    folder: Path
    sessions: list[dict]
    stage: dict

    @property
    def kv_cache_hit_percent(self) -> Optional[float]:
        return self.stage.get("kv_cache_hit_percent")


def report_glob(config: dict, config_dir: Path) -> str:
    """The folders a config's runs write to, as a glob (relative storage paths resolve from the config's folder)."""
    path = ConfigDocument(config).local_report_path.replace("{timestamp}", "*")
    return str(Path(config_dir) / path) if not Path(path).is_absolute() else path


def read_reports(config: dict, config_dir: Path) -> SessionReports:
    """The newest run's reports; raises FileNotFoundError naming what is missing. Each session's file_path is made
    a path to its trace file: from a dataset file (hf_dataset_path) it is the row's source_id, relative to the
    folder that holds the dataset file and the trace directories (formats/rows.py)."""
    folders = sorted(glob.glob(report_glob(config, config_dir)))
    if not folders:
        raise FileNotFoundError(f"no report folder matches {report_glob(config, config_dir)}")
    folder = Path(folders[-1])
    document = ConfigDocument(config)
    # inference-perf runs from the config's folder: a trace directory's file paths are relative to it
    base = (
        Path(config_dir)
        if document.reads_trace_directory
        else (Path(config_dir) / trace_dir_of(document.replay)).parent
    )
    sessions = json.loads((folder / PER_SESSION).read_text())
    for session in sessions:
        session["file_path"] = str(base / session["file_path"])  # an absolute file_path stays as it is
    return SessionReports(folder=folder, sessions=sessions, stage=json.loads((folder / STAGE).read_text()))


def clear_reports(config: dict, config_dir: Path) -> None:
    """Remove earlier runs' report folders of a config, so the folder read afterwards is this run's."""
    for folder in glob.glob(report_glob(config, config_dir)):
        shutil.rmtree(folder, ignore_errors=True)
