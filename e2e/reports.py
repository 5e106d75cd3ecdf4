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

__all__ = ["SessionReports", "clear_reports", "report_glob", "read_reports"]

PER_SESSION = "per_session_lifecycle_metrics.json"
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
    path = config["storage"]["local_storage"]["path"].replace("{timestamp}", "*")
    return str(Path(config_dir) / path) if not Path(path).is_absolute() else path


def read_reports(config: dict, config_dir: Path) -> SessionReports:
    """The newest run's reports; raises FileNotFoundError naming what is missing."""
    folders = sorted(glob.glob(report_glob(config, config_dir)))
    if not folders:
        raise FileNotFoundError(f"no report folder matches {report_glob(config, config_dir)}")
    folder = Path(folders[-1])
    return SessionReports(
        folder=folder,
        sessions=json.loads((folder / PER_SESSION).read_text()),
        stage=json.loads((folder / STAGE).read_text()),
    )


def clear_reports(config: dict, config_dir: Path) -> None:
    """Remove earlier runs' report folders of a config, so the folder read afterwards is this run's."""
    for folder in glob.glob(report_glob(config, config_dir)):
        shutil.rmtree(folder, ignore_errors=True)
