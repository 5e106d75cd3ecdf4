"""A whole run: every session written by the worker pool into a staging folder, then the tokenizer folder and the
manifest, the configs into a staging folder of their own, and both put in place together (outdir.py).

Workers build and write their own sessions (big bytes never cross processes; the parent only gathers sizes and
hashes). Everything that decides bytes or could refuse the run is checked before the first session is written: the
output and config folders (writable, nothing foreign in them), the spec against the window, the configs' options.
The free space is estimated while the first sessions are written (it feeds the workers nothing; see timeline.py for
why the critical path matters), and stops the run when it is short. A failed or interrupted run removes its staging
folders and leaves both outputs as they were.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

from ..formats.compression import ZSTD_SUFFIX, compress_chunks, make_compressor, read_trace_bytes
from .configs import ConfigOptions, render_configs, write_configs
from .dataset import DatasetBuilder, Task, check_fits, directories, file_name, files_per_task, tasks
from ..errors import OutputError
from ..formats.manifest import MANIFEST_NAME, FileRecord, human_size, manifest_bytes, record
from ..formats.outdir import Staging, discard, open_staging, place_all
from .pool_cache import PoolCache, cache_folder
from ..formats.rows import dataset_file, row_chunks
from .scenarios import scenario_by_id
from .spec import Spec
from .timeline import Timeline
from ..formats.tokenizer import Tokenizer
from .workers import build_pieces, run_tasks
from ..formats.writer import SessionWriter

__all__ = ["RunOptions", "generate", "TOKENIZER_FOLDER"]

TOKENIZER_FOLDER = "tokenizer"
# Sessions composed up front per scenario to estimate the bytes a run writes (the free-space check).
_SIZE_SAMPLES = 4


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
    config_dir: Path | None = None  # None: no configs
    configs: ConfigOptions = field(default_factory=ConfigOptions)
    count: str = "auto"  # spans' input_tokens: template, content, or auto (template when the tokenizer has one)
    notice: Optional[Callable[[str], None]] = None  # one-line notices about the run (a slow counting fallback)
    pool_cache: bool = True  # read and keep prepared content pools in the user's cache folder (pool_cache.py)
    timeline: Timeline = field(
        default_factory=Timeline, compare=False
    )  # where the wall time went (timeline.py); never in output


def _progress(total: int, enabled: bool):
    from tqdm import tqdm

    return tqdm(total=total, unit="file", desc="fastgen", disable=not enabled, dynamic_ncols=True)


def _estimated_bytes(builder: DatasetBuilder, todo: list[Task], zstd_level: int | None) -> int:
    """About how many bytes the tasks' files take: a few sessions of each scenario composed, scaled up; compressed,
    by the ratio of one of them. Within about 10% on the default set, at about 2% of its composing time."""
    compressor = make_compressor(zstd_level) if zstd_level is not None else None
    total = 0
    for scenario_id in sorted({t.scenario_id for t in todo}):
        mine = [t for t in todo if t.scenario_id == scenario_id]
        sample = mine[:: max(1, len(mine) // _SIZE_SAMPLES)][:_SIZE_SAMPLES]
        files = [chunks for task in sample for _, chunks in builder.chunks_for(task)]
        size = sum(len(c) for chunks in files for c in chunks)
        if compressor is not None:
            first = files[0]
            size = size * sum(len(c) for c in compress_chunks(compressor, first)) // max(1, sum(map(len, first)))
        total += size * len(mine) // len(sample)
    return total


def _check_space(staging: Staging, needed: int, compressed: bool) -> None:
    free = shutil.disk_usage(staging.folder).free
    if needed > free:
        hint = "" if compressed else ", or add --compress zstd (about 20x smaller)"
        raise OutputError(
            f"{staging.out} needs about {human_size(needed)} and its filesystem has {human_size(free)} free; "
            f"free some space, choose another --output-dir{hint}"
        )


def _generate_into(staging: Staging, options: RunOptions, tokenizer: Tokenizer) -> tuple[list[FileRecord], str]:
    """The trace files' records, and how their input tokens were counted."""
    root = staging.folder
    for name in directories(options.spec):
        (root / name).mkdir()
    todo = tasks(options.spec)
    builder = DatasetBuilder(tokenizer, options.spec, seed=options.seed, model=options.model, count=options.count)
    folder = cache_folder() if options.pool_cache else None
    cache = PoolCache(folder, tokenizer.identity.sha256, options.seed) if folder is not None else None
    builder.prepare(build_pieces(builder, options.workers), cache, mark=options.timeline.mark)
    if getattr(builder.count, "whole", False) and options.notice is not None:
        options.notice(
            "the chat template's prompts do not decompose into per-message pieces under this tokenizer: "
            "every span's input tokens are counted by rendering its prompt whole (exact, but slow)"
        )

    def check_space() -> None:  # while the workers write: it feeds them nothing, and a failure discards the staging
        options.timeline.mark("workers started")
        # twice the trace files: each directory's dataset file holds the same bytes again (rows.py)
        needed = 2 * _estimated_bytes(builder, todo, options.zstd_level)
        _check_space(staging, needed, options.zstd_level is not None)
        options.timeline.mark("space check")

    records: list[FileRecord] = []
    written = 0  # a running total: summing all records on every update is quadratic in the number of files
    with _progress(sum(files_per_task(t) for t in todo), options.progress) as bar:

        def done(batch: list[FileRecord]) -> None:
            nonlocal written
            options.timeline.once("first session written")
            records.extend(batch)
            written += sum(r.size for r in batch)
            bar.update(len(batch))
            if options.progress:
                bar.set_postfix_str(f"{written / 1e6:,.0f} MB", refresh=False)

        run_tasks(
            builder,
            todo,
            root=root,
            zstd_level=options.zstd_level,
            workers=options.workers,
            done=done,
            meanwhile=check_space,
        )
    options.timeline.mark("pool")
    records += _write_datasets(root, options.spec, records, options.zstd_level)
    options.timeline.mark("dataset files")
    return records, builder.count.name


def _write_datasets(root: Path, spec: Spec, records: list[FileRecord], zstd_level: int | None) -> list[FileRecord]:
    """Each trace directory's session-per-row file (rows.py), from the files the workers wrote, in sorted name
    order whatever order they finished in: one file at a time through memory, so it streams."""
    writer = SessionWriter(root, zstd_level)
    written = []
    for layout in directories(spec):
        names = sorted(r.path for r in records if r.path.startswith(layout + "/"))
        rows = (row_chunks(_plain_name(name), read_trace_bytes(root / name)) for name in names)
        written.append(writer.stream(dataset_file(layout), rows))
    return written


def _plain_name(name: str) -> str:
    # the row names the .json the file is once unpacked: the same row whether or not the traces are compressed
    return name[: -len(ZSTD_SUFFIX)] if name.endswith(ZSTD_SUFFIX) else name


def _planned_traces(options: RunOptions, tokenizer: Tokenizer) -> tuple[str, ...]:
    """Every path the run will write under the output folder: what --force must find free before generating."""
    suffix = ZSTD_SUFFIX if options.zstd_level is not None else ""
    sessions = [
        f"{layout}/{file_name(task.index)}{suffix}"
        for task in tasks(options.spec)
        for layout in scenario_by_id(task.scenario_id).layouts
    ]
    datasets = [dataset_file(layout) + suffix for layout in directories(options.spec)]
    return (*sessions, *datasets, *(f"{TOKENIZER_FOLDER}/{name}" for name in tokenizer.folder_files), MANIFEST_NAME)


def _check_separate(output_dir: Path, config_dir: Path | None) -> None:
    if config_dir is None:
        return
    out, conf = Path(os.path.realpath(output_dir)), Path(os.path.realpath(config_dir))
    if out == conf or out in conf.parents or conf in out.parents:
        raise OutputError(
            f"--output-dir {output_dir} and --config-dir {config_dir} overlap; give them separate "
            f"folders, e.g. --output-dir traces --config-dir configs"
        )


def _render(options: RunOptions) -> dict[str, str] | None:
    if options.config_dir is None:
        return None
    return render_configs(
        spec=options.spec,
        model=options.model,
        base_seed=options.seed,
        trace_root=options.output_dir,
        config_root=options.config_dir,
        tokenizer_dir=options.output_dir / TOKENIZER_FOLDER,
        compressed=options.zstd_level is not None,
        **dataclasses.asdict(options.configs),
    )


def _write_manifest(
    folder: Path,
    files: list[FileRecord],
    tokenizer: Tokenizer,
    options: RunOptions,
    arguments: dict,
    count: str | None = None,
) -> None:
    described = tokenizer.identity.to_dict()
    if count is not None:
        described["count"] = count
    (folder / MANIFEST_NAME).write_bytes(
        manifest_bytes(files=files, tokenizer=described, workload=options.spec.to_dict(), arguments=arguments)
    )


def _write_configs(staging: Staging, rendered: dict[str, str], tokenizer: Tokenizer, options: RunOptions) -> None:
    write_configs(staging.folder, rendered)
    files = [record(rel, text.encode()) for rel, text in sorted(rendered.items())]
    # The configs' own manifest: which files fastgen wrote, so that a later run replaces them and no hand edit.
    arguments = {**(options.arguments or {}), "configs": dataclasses.asdict(options.configs)}
    _write_manifest(staging.folder, files, tokenizer, options, arguments)


def generate(options: RunOptions, tokenizer: Tokenizer) -> list[FileRecord]:
    """Write the dataset, the tokenizer folder and the manifest to options.output_dir, and the configs to
    options.config_dir, all or nothing; return the dataset's file records."""
    check_fits(options.spec)
    _check_separate(options.output_dir, options.config_dir)
    rendered = _render(options)  # before anything is written: it refuses unknown server or metrics types
    mark = options.timeline.mark
    mark("checks")
    stagings: list[Staging] = []
    try:
        stagings.append(
            open_staging(options.output_dir, force=options.force, planned=_planned_traces(options, tokenizer))
        )
        if rendered is not None and options.config_dir is not None:  # rendered: there is a config_dir (_render)
            stagings.append(
                open_staging(
                    options.config_dir,
                    force=options.force,
                    protect_edits=True,
                    option="--config-dir",
                    planned=(*rendered, MANIFEST_NAME),
                )
            )
        traces = stagings[0]
        mark("staging")
        records, count = _generate_into(traces, options, tokenizer)
        exported = tokenizer.export(traces.folder / TOKENIZER_FOLDER)
        records = sorted(records + [record(f"{TOKENIZER_FOLDER}/{name}", data) for name, data in exported])
        _write_manifest(traces.folder, records, tokenizer, options, options.arguments or {}, count)
        mark("manifest")
        if rendered is not None:
            _write_configs(stagings[1], rendered, tokenizer, options)
        mark("configs")
        place_all(stagings)
        mark("placed")
    except OSError as exc:
        for staging in stagings:
            discard(staging)
        raise OutputError(
            f"writing {options.output_dir} failed ({exc.strerror or exc}); it was left as it was"
        ) from exc
    except BaseException:
        for staging in stagings:
            discard(staging)
        raise
    return records
