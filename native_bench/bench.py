"""The sequence of variants, one process each, back to back on the same machine, and their byte checks.

Order: native, fastgen at each worker count (cold: no pool cache), fastgen at the most workers with its pools read
from the pool cache (warm), `fastgen analyze` of that dataset, the write floor three
times (fed the last fastgen output: plain writes into warm memory, then settled; then settled with uncached
writes), zstd at each level, then the optional scale check (with `fastgen analyze` of every session of one
directory of each of its two datasets). Each variant starts from a clean slate (previous output deleted, then sync,
then `settle` seconds for the memory it freed to go cold; see launch.py).
The first plain output (native unless skipped) is the reference every other variant's bytes are compared with.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from fastgen.formats.compression import ZSTD_SUFFIX

from .hashes import compare, hash_files, manifest_sessions, session_paths, zstd_content_sizes, zstd_sample
from .launch import clean_slate, run_variant, scratch_root

__all__ = ["Options", "run"]

SEED = 42  # fastgen's default seed, passed explicitly to both generators so their bytes can match


@dataclass(frozen=True)
class Options:
    scale: float
    budget_scale: float
    workers: tuple[int, ...]
    zstd_levels: tuple[int, ...]
    skip_native: bool
    scale_check: float | None
    scratch: Path | None
    zstd_sample: int
    settle: float = 0.0
    large_vocab: Path | None = None  # a tokenizer folder with a real 128K-150K vocabulary: one more fastgen row


def _fastgen_argv(
    out: Path,
    workers: int,
    scale: float,
    budget_scale: float,
    *,
    level: int | None = None,
    tokenizer: str = "builtin",
    cache: bool = False,
) -> list[str]:
    """fastgen's arguments; without `cache`, cold: its content pools built afresh (--no-cache)."""
    argv = [
        "--tokenizer",
        tokenizer,
        "--seed",
        str(SEED),
        "--workers",
        str(workers),
        "--output-dir",
        str(out / "traces"),
        "--config-dir",
        str(out / "configs"),
        "--quiet",
        "--scale",
        repr(scale),
        "--budget-scale",
        repr(budget_scale),
    ]
    argv += [] if cache else ["--no-cache"]
    return argv + (["--compress", "zstd", "--level", str(level)] if level is not None else [])


def _row(
    name: str,
    kind: str,
    res: dict,
    sync_s: float,
    *,
    workers: int,
    scale: float,
    files: int,
    size: int,
    disk: int,
    wall_s: float,
    level: int | None = None,
) -> dict:
    children = res["children_rss_kib"]
    extra = {
        k: res[k] for k in ("read_s", "prepare_s", "settle_s", "dontcache") if k in res
    }  # the floor's untimed preparation
    return {
        **extra,
        "variant": name,
        "kind": kind,
        "workers": workers,
        "scale": scale,
        "zstd_level": level,
        "wall_s": wall_s,
        "cpu_s": res["cpu_s"],
        "process_s": res["process_s"],
        "timed_s": res["timed_s"],
        "sync_before_s": sync_s,
        "files": files,
        "bytes": size,
        "disk_bytes": disk,
        "rss_mib": res["rss_kib"] / 1024,
        "worker_rss_mib": children / 1024 if children else None,
        "marks": res.get("marks"),  # fastgen's phases (--timings), seconds since its process started
    }


class _Run:
    """State of one bench run: the scratch folder, outputs still on disk, the reference hashes, rows and checks."""

    def __init__(self, opts: Options, root: Path, log: Callable[[str], None]):
        self.opts, self.root, self.log = opts, root, log
        self.jobs = root / "jobs"
        self.jobs.mkdir()
        self.previous: list[Path] = []
        self.reference: dict[str, str] | None = None  # rel -> content hash (the manifest's)
        self.reference_bytes = 0
        self.rows: list[dict] = []
        self.checks: list[dict] = []

    def slate(self, keep: Path | None = None, settle: float = 0.0) -> float:
        sync_s = clean_slate(*[p for p in self.previous if p != keep], settle=settle)
        self.previous = [keep] if keep else []
        return sync_s

    def variant(
        self, name: str, kind: str, params: dict, *, keep: Path | None = None, settle: float | None = None
    ) -> tuple[Path, dict, float]:
        """Run one variant from a clean slate (everything earlier deleted but `keep`, then the settle time); its
        output is root/name."""
        sync_s = self.slate(keep, self.opts.settle if settle is None else settle)
        out = self.out(name)
        self.previous.append(out)
        self.log(f"{name} ...")
        res = run_variant(kind, params, self.jobs, name)
        self.log(f"{name}: {res['process_s']:.1f} s (process)")
        return out, res, sync_s

    def add_plain_row(
        self,
        name: str,
        kind: str,
        res: dict,
        sync_s: float,
        *,
        workers: int,
        records: dict[str, tuple[int, str]],
        scale: float | None = None,
        timed: str = "process_s",
        directory: str | None = None,
    ) -> None:
        """The row of a variant over plain files (`records`: rel -> (size, hash)), on disk as they are: its wall
        time `res[timed]`, its scale the run's unless given, the trace directory it read where it read one."""
        size = sum(s for s, _ in records.values())
        row = _row(
            name,
            kind,
            res,
            sync_s,
            workers=workers,
            scale=self.opts.scale if scale is None else scale,
            files=len(records),
            size=size,
            disk=size,
            wall_s=res[timed],
        )
        self.rows.append({**row, "directory": directory} if directory else row)

    def out(self, name: str) -> Path:
        return self.root / name

    def check_plain(self, name: str, records: dict[str, tuple[int, str]], problems: list[str]) -> None:
        got = {rel: sha for rel, (_, sha) in records.items()}
        if self.reference is None:
            self.reference, self.reference_bytes = got, sum(size for size, _ in records.values())
        else:
            problems = problems + compare(self.reference, got)
        self.checks.append({"variant": name, "files": len(got), "equal": not problems, "problems": problems})

    def check_zstd(self, name: str, traces: Path, records: dict[str, tuple[int, str]], problems: list[str]) -> int:
        """Same paths as the reference, same total content size, and a decompressed sample byte-equal."""
        assert self.reference is not None  # a plain output, which runs before every zstd one (run), set it
        rels = sorted(records)
        uncompressed = zstd_content_sizes(traces, rels)
        plain = {rel.removesuffix(ZSTD_SUFFIX): "" for rel in rels}
        problems = problems + compare({rel: "" for rel in self.reference}, plain)
        if uncompressed != self.reference_bytes:
            problems.append(f"frames declare {uncompressed} bytes, the plain output has {self.reference_bytes}")
        sampled, sample_problems = zstd_sample(traces, self.reference, self.opts.zstd_sample)
        problems += sample_problems
        self.checks.append(
            {"variant": name, "files": len(rels), "sampled": sampled, "equal": not problems, "problems": problems}
        )
        return uncompressed


def _native(run: _Run) -> None:
    o = run.opts
    out, res, sync_s = run.variant(
        "native",
        "native",
        {"out": str(run.out("native")), "scale": o.scale, "budget_scale": o.budget_scale, "seed": SEED},
    )
    hashed = hash_files(out, session_paths(out))
    run.check_plain("native", hashed, [])
    run.add_plain_row("native", "native", res, sync_s, workers=1, records=hashed)


def _fastgen(run: _Run, workers: int, *, warm: bool = False) -> Path:
    """fastgen at `workers`: cold, its content pools built afresh; or warm, read from the pool cache (a folder of
    the bench's own, filled first by an untimed run of the same set: its pools, and its facts (the count proof and
    margin, which are per workload), as a second run of the same set on a machine finds them)."""
    o = run.opts
    name, kind = (f"fastgen-w{workers}-warm", "fastgen-warm") if warm else (f"fastgen-w{workers}", "fastgen")
    timings = run.jobs / f"{name}.timings.json"
    argv = _fastgen_argv(run.out(name), workers, o.scale, o.budget_scale, cache=warm)
    params: dict = {"argv": [*argv, "--timings", str(timings)], "timings": str(timings)}
    if warm:
        params["env"] = {"XDG_CACHE_HOME": str(run.root / "cache")}
        fill = _fastgen_argv(run.out("cache-fill"), workers, o.scale, o.budget_scale, cache=True)
        run.variant("cache-fill", "fastgen", {"env": params["env"], "argv": fill}, settle=0.0)
    out, res, sync_s = run.variant(name, "fastgen", params)
    records, problems = manifest_sessions(out / "traces")
    run.check_plain(name, records, problems)
    run.add_plain_row(name, kind, res, sync_s, workers=workers, records=records)
    return out


def _large_vocab(run: _Run, workers: int) -> None:
    """fastgen with a real large vocabulary (other bytes than the reference: its own manifest is checked)."""
    o, name = run.opts, f"fastgen-vocab-w{workers}"
    argv = _fastgen_argv(run.out(name), workers, o.scale, o.budget_scale, tokenizer=str(o.large_vocab))
    out, res, sync_s = run.variant(name, "fastgen", {"argv": argv})
    records, problems = manifest_sessions(out / "traces")
    run.checks.append(
        {
            "variant": name,
            "files": len(records),
            "equal": not problems,
            "problems": problems,
            "against": "its own manifest (another tokenizer: other bytes)",
        }
    )
    run.add_plain_row(name, "vocab", res, sync_s, workers=workers, records=records)


ANALYZE_CAPACITY = 420_000  # the README's example: Llama-3.3-70B in bf16 on four 80 GB GPUs
SCALE_CHECK_DIRECTORY = "scenario3_noisy"  # the most distinct blocks: 3.2 million in the default set


def _analyze(
    run: _Run, source: Path, name: str, kind: str, *, workers: int, scale: float, every_session_of: str | None = None
) -> None:
    """`fastgen analyze` at one KV capacity over `source`'s traces and configs (issue 12's target: the full default
    set in under 60 s on two cores), or, with `every_session_of`, over every session of that one trace directory in
    file order (its memory against the number of sessions); `source` stays for the variants after it."""
    traces = source / "traces" / every_session_of if every_session_of else source / "traces"
    configs = [] if every_session_of else ["--configs", str(source / "configs")]
    argv = [
        "--quiet",
        "analyze",
        str(traces),
        *configs,
        "--kv-cache-tokens",
        str(ANALYZE_CAPACITY),
        "--workers",
        str(workers),
    ]
    _, res, sync_s = run.variant(name, "fastgen", {"argv": argv}, keep=source)
    records, _ = manifest_sessions(source / "traces")
    if every_session_of:
        records = {path: v for path, v in records.items() if Path(path).parent.name == every_session_of}
    run.add_plain_row(
        name, kind, res, sync_s, workers=workers, records=records, scale=scale, directory=every_session_of
    )


def _floor(run: _Run, source: Path, name: str, settle: float, *, dontcache: bool = False) -> Path:
    """The write floor, fed `source`'s trace files. The runner deletes the source after reading it, then waits
    `settle` seconds before its timed loop: 0 gives the loop memory freed moments before (warm), the run's settle time
    the same state every other variant starts in. `dontcache`: uncached buffered writes, as fastgen makes them."""
    files = session_paths(source / "traces")
    params = {
        "source": str(source / "traces"),
        "files": files,
        "out": str(run.out(name) / "traces"),
        "settle_s": settle,
        "dontcache": dontcache,
    }
    out, res, sync_s = run.variant(name, "floor", params, keep=source, settle=0.0)
    traces = out / "traces"
    hashed = hash_files(traces, session_paths(traces))
    run.check_plain(name, hashed, [])
    # The floor's time is its write loop only: reading the bytes in and deleting the source are not the floor.
    kind = "floor" if settle == run.opts.settle else "floor-warm"  # settled floors: /floor takes the faster
    run.add_plain_row(name, kind, res, sync_s, workers=1, records=hashed, timed="timed_s")
    return out


def _zstd(run: _Run, name: str, kind: str, workers: int, *, level: int, scale: float, check: bool) -> Path:
    o = run.opts
    argv = _fastgen_argv(run.out(name), workers, scale, o.budget_scale, level=level)
    out, res, sync_s = run.variant(name, "fastgen", {"argv": argv})
    traces = out / "traces"
    records, problems = manifest_sessions(traces)
    if check:
        uncompressed = run.check_zstd(name, traces, records, problems)
    else:  # a scaled dataset has no plain reference; its size comes from the frame headers
        uncompressed = zstd_content_sizes(traces, sorted(records))
        if problems:
            run.checks.append({"variant": name, "files": len(records), "equal": False, "problems": problems})
    run.rows.append(
        _row(
            name,
            kind,
            res,
            sync_s,
            workers=workers,
            scale=scale,
            files=len(records),
            size=uncompressed,
            disk=sum(s for s, _ in records.values()),
            wall_s=res["process_s"],
            level=level,
        )
    )
    return out


def run(opts: Options, log: Callable[[str], None]) -> dict:
    t0 = time.perf_counter()
    with scratch_root(opts.scratch) as root:
        r = _Run(opts, root, log)
        if not opts.skip_native:
            _native(r)
        last = None
        for workers in opts.workers:
            last = _fastgen(r, workers)
        last = _fastgen(r, max(opts.workers), warm=True)  # the same bytes (checked): analyze and the floors take them
        _analyze(r, last, f"analyze-w{max(opts.workers)}", "analyze", workers=max(opts.workers), scale=opts.scale)
        if opts.settle:
            last = _floor(r, last, "floor-warm", 0.0)
        last = _floor(r, last, "floor", opts.settle)
        _floor(r, last, "floor-dontcache", opts.settle, dontcache=True)
        if opts.large_vocab is not None:  # after the floors: a variant's clean slate deletes the floors' source
            _large_vocab(r, max(opts.workers))
        n = max(opts.workers)
        for level in opts.zstd_levels:
            _zstd(r, f"zstd-{level}", "zstd", n, level=level, scale=opts.scale, check=True)
        if opts.scale_check:
            one = _zstd(r, "scale-x1", "scale", n, level=3, scale=opts.scale, check=True)
            _analyze(
                r,
                one,
                "analyze-x1",
                "analyze-scale",
                workers=n,
                scale=opts.scale,
                every_session_of=SCALE_CHECK_DIRECTORY,
            )
            big = _zstd(
                r, f"scale-x{opts.scale_check:g}", "scale", n, level=3, scale=opts.scale * opts.scale_check, check=False
            )
            _analyze(
                r,
                big,
                f"analyze-x{opts.scale_check:g}",
                "analyze-scale",
                workers=n,
                scale=opts.scale * opts.scale_check,
                every_session_of=SCALE_CHECK_DIRECTORY,
            )
        r.slate(settle=0.0)
    return {
        "rows": r.rows,
        "checks": r.checks,
        "bytes_equal": all(c["equal"] for c in r.checks),
        "total_s": time.perf_counter() - t0,
    }
