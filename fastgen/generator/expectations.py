"""What a dataset fastgen wrote must look like when it is read back, by the workload its manifest records (the
benchmark's default where there is none): each trace directory's graph shape, which validate checks every session
against, and whether a replay may send the recorded outputs, which the bakeoff checks before it runs.

The read side imports no generator (docs/architecture.md, the wings): it takes these as arguments, handed in by the
command and by the library calls that do what the commands do (dataset_validation.py, dataset_bakeoff.py).
"""

from __future__ import annotations

from pathlib import Path

from ..errors import OutputError, SpecError
from ..formats.config_dialect import check_outputs_mode
from ..formats.manifest import read_manifest
from .scenarios import Shape, default_spec, in_spec
from .spec import Spec
from .workload import spec_from_document

__all__ = ["check_replay_outputs", "expected_shapes", "recorded_spec"]


def recorded_spec(folder: Path | None) -> Spec | None:
    """The workload the manifest in `folder` records; None where there is no folder, no fastgen manifest, or one of
    another version (its workload does not load)."""
    if folder is None:
        return None
    try:
        return spec_from_document(read_manifest(folder)["workload"])
    except (OutputError, KeyError, SpecError):
        return None


def expected_shapes(manifest_folder: Path | None = None) -> dict[str, Shape]:
    """Trace directory -> the Shape its sessions must have: for the spec a dataset's manifest records, else for the
    benchmark's default spec."""
    spec = recorded_spec(manifest_folder) or default_spec()
    return {layout: s.shape(s.spec(spec)) for s in in_spec(spec) for layout in s.layouts}


def check_replay_outputs(trace_root: Path, outputs: str) -> None:
    """SpecError where the traces' workload (their manifest) does not allow the outputs mode (live, recorded);
    traces without a manifest are taken as they are."""
    spec = recorded_spec(trace_root)
    if spec is not None:
        check_outputs_mode(spec, outputs)
