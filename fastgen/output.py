"""A whole run: every session written by the worker pool into a staging folder, then the tokenizer folder and the
manifest, then the staging folder put in place of the output (outdir.py).

Workers build and write their own sessions (big bytes never cross processes; the parent only gathers sizes and
hashes). A failed or interrupted run removes its staging folder and leaves the output as it was.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from .dataset import DIRECTORIES, FILES_PER_TASK, DatasetBuilder, tasks
from .errors import OutputError
from .manifest import MANIFEST_NAME, FileRecord, manifest_bytes, record
from .outdir import check_output_dir, make_staging, place
from .spec import Spec
from .tokenizer import Tokenizer
from .workers import build_pieces, run_tasks

__all__ = ["RunOptions", "generate", "TOKENIZER_FOLDER"]

TOKENIZER_FOLDER = "tokenizer"


@dataclass(frozen=True)
class RunOptions:
    model: str
    tokenizer: str
    seed: int
    spec: Spec
    output_dir: Path
    workers: int
    progress: bool = False
    arguments: dict | None = None  # recorded in the manifest
    zstd_level: int | None = None  # None: plain .json; else .json.zst at this level
    force: bool = False  # write beside files fastgen did not write (removing only what its manifest lists)


def _progress(total: int, enabled: bool):
    from tqdm import tqdm

    return tqdm(total=total, unit="file", desc="fastgen", disable=not enabled, dynamic_ncols=True)


def _generate_into(staging: Path, options: RunOptions, tokenizer: Tokenizer) -> list[FileRecord]:
    for name in DIRECTORIES:
        (staging / name).mkdir()
    todo = tasks(options.spec)
    builder = DatasetBuilder(tokenizer, options.spec, seed=options.seed, model=options.model)
    builder.prepare(build_pieces(builder, options.workers))
    records: list[FileRecord] = []
    written = 0  # a running total: summing all records on every update is quadratic in the number of files
    with _progress(sum(FILES_PER_TASK[t.scenario_id] for t in todo), options.progress) as bar:
        def done(batch: list[FileRecord]) -> None:
            nonlocal written
            records.extend(batch)
            written += sum(r.size for r in batch)
            bar.update(len(batch))
            if options.progress:
                bar.set_postfix_str(f"{written / 1e6:,.0f} MB", refresh=False)

        run_tasks(builder, todo, root=staging, zstd_level=options.zstd_level, workers=options.workers, done=done)
    return records


def generate(options: RunOptions, tokenizer: Tokenizer) -> list[FileRecord]:
    """Write the dataset, the tokenizer folder and the manifest to options.output_dir; return the file records."""
    out = Path(os.path.abspath(options.output_dir))  # "." or ".." has no name to put a staging folder beside
    check_output_dir(out, force=options.force)
    staging = make_staging(out)
    try:
        records = _generate_into(staging, options, tokenizer)
        exported = tokenizer.export(staging / TOKENIZER_FOLDER)
        records = sorted(records + [record(f"{TOKENIZER_FOLDER}/{name}", data) for name, data in exported])
        (staging / MANIFEST_NAME).write_bytes(manifest_bytes(
            files=records, tokenizer=tokenizer.identity.to_dict(), spec=options.spec.to_dict(),
            arguments=options.arguments or {}))
        place(staging, out)
    except OSError as exc:
        shutil.rmtree(staging, ignore_errors=True)
        raise OutputError(f"writing {out} failed ({exc}); it was left as it was") from exc
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return records
