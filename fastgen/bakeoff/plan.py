"""Which configs a bakeoff runs, in which order, and the config each run really uses.

A run's config is the generated one with only what the bakeoff decides changed: the server's URL and type, the
report folder (the run's own), absolute paths (so it runs from anywhere), the outputs and tool-call max_tokens modes
when the bakeoff was asked for them, and the report and label sections that `fastgen compare` needs, in case the
configs came from an older fastgen. Pure: YAML text in, YAML text out. Whether the dataset's workload allows the
outputs mode is the runner's check (BakeoffOptions.check_outputs): the plans behind a workload are the generator's.
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Optional

import yaml

from ..errors import OutputError
from ..formats.config_dialect import REPORT_LABELS, replay_modes, report_section
from ..formats.config_document import ConfigDocument, local_storage
from ..formats.manifest import read_manifest
from ..formats.rows import with_source_paths

__all__ = ["ConfigRun", "replay_modes_of", "select_configs", "run_config_text"]


@dataclass(frozen=True)
class ConfigRun:
    name: str  # "scenario1/c10": the config's path in its folder, without .yml
    path: Path  # the config file

    @property
    def scenario(self) -> str:
        return PurePosixPath(self.name).parent.as_posix()

    @property
    def short_name(self) -> str:
        return PurePosixPath(self.name).name


def _order(name: str):
    # the design's order: scenario by scenario, then by load level (c10 before c100)
    scenario, _, config = name.rpartition("/")
    level = re.match(r"c(\d+)", config)
    return scenario, int(level.group(1)) if level else 0, config


def select_configs(config_dir: Path, patterns: list[str] | None = None) -> list[ConfigRun]:
    """The configs fastgen wrote into config_dir (its manifest lists them), in the design's order; with patterns,
    those matching any of them (`scenario1/c10`, `scenario3/*_noisy`, or a whole scenario: `scenario2`)."""
    config_dir = Path(config_dir)
    try:
        listed = read_manifest(config_dir)["files"]
    except (OSError, KeyError, ValueError) as exc:
        raise OutputError(
            f"{config_dir} is not a config folder written by fastgen ({exc}); pass --config-dir with "
            f"the folder fastgen --config-dir wrote"
        ) from None
    names = sorted((rel.removesuffix(".yml") for rel in listed if rel.endswith(".yml")), key=_order)
    if patterns:
        wanted = [p.removesuffix(".yml").rstrip("/") for p in patterns]
        unmatched = [p for p in wanted if not any(_matches(n, p) for n in names)]
        if unmatched:
            raise OutputError(
                f"no config in {config_dir} matches {unmatched[0]!r}; the configs are "
                f"{', '.join(names[:6])}{', ...' if len(names) > 6 else ''}"
            )
        names = [n for n in names if any(_matches(n, p) for p in wanted)]
    return [ConfigRun(name, config_dir / f"{name}.yml") for name in names]


def _matches(name: str, pattern: str) -> bool:
    return fnmatch.fnmatchcase(name, pattern) or fnmatch.fnmatchcase(name, pattern + "/*")


def run_config_text(
    text: str,
    *,
    config_dir: Path,
    url: str,
    engine: str,
    report_dir: Path,
    outputs: Optional[str] = None,
    tool_call_max_tokens: Optional[str] = None,
    tool_choice: Optional[str] = None,
    in_flight: Optional[int] = None,
) -> str:
    """The YAML of one run: `text` (a generated config) pointed at `url` and reporting into `report_dir`; with
    `outputs` (live, recorded) or `tool_call_max_tokens` (floor, recorded), replaying so (None: as the config says);
    with `in_flight`, at that many sessions in flight (a capacity search's step)."""
    document = ConfigDocument(yaml.safe_load(text))
    try:
        sections = (document.server, document.replay, document.tokenizer)
    except (KeyError, TypeError):
        raise OutputError(
            f"{config_dir} has a config without server, data.otel_trace_replay or tokenizer sections; "
            f"regenerate the configs with fastgen"
        ) from None
    document.point_at(url, engine)
    if in_flight is not None:
        document.hold_in_flight(in_flight)
    try:
        replay = document.replay = with_source_paths(sections[1], lambda p: _absolute(p, config_dir))
    except (KeyError, TypeError):
        raise OutputError(
            f"{config_dir} has a config whose otel_trace_replay names neither a trace_directory nor a fastgen "
            f"dataset file (hf_dataset_path); regenerate the configs with fastgen"
        ) from None
    said = replay_modes_of(replay)
    replay.update(replay_modes(outputs or said[0], tool_call_max_tokens or said[1], tool_choice or said[2]))
    replay["attribute_to_label_map"] = {**dict(REPORT_LABELS), **(replay.get("attribute_to_label_map") or {})}
    name = document.tokenizer_name
    if name and (config_dir / name).exists():  # a folder beside the traces; a hub id stays as it is
        document.tokenizer_name = _absolute(name, config_dir)
    document.set_report(report_section())
    document.storage = local_storage(Path(report_dir).resolve().as_posix())
    return yaml.safe_dump(document.raw, sort_keys=False, default_flow_style=False, allow_unicode=True)


def replay_modes_of(replay: dict) -> tuple[str, str, str]:
    """(outputs, tool-call max_tokens, tool_choice) modes of a data.otel_trace_replay section, inference-perf
    0.7.0's defaults where it says nothing (outputs substituted live, tool-call max_tokens at the 4096 floor, the
    recorded tool forced)."""
    outputs = "recorded" if replay.get("disable_output_substitution", False) else "live"
    tool_calls = "floor" if replay.get("override_tool_call_max_tokens", True) else "recorded"
    tool_choice = "as_recorded" if replay.get("tool_choice_mode") == "as_recorded" else "forced"
    return outputs, tool_calls, tool_choice


def _absolute(path: str, base: Path) -> str:
    return (Path(base) / path).resolve().as_posix()
