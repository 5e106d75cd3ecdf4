"""The work of ONE variant, run inside its own process: `python -m native_bench.runner JOB.json`.

A process of its own because ru_maxrss is a high-water mark that never goes down: only a fresh process gives a
variant's peak memory alone. RUSAGE_SELF is this process; RUSAGE_CHILDREN is the largest reaped child (fastgen's
pool workers, which the pool joins before the command returns). Both are KiB on Linux.

The job file (a file, not an argument: a file list can outgrow one argv string) names the kind, its parameters
and where to write the result: timed_s (what the variant itself times), rss_kib, children_rss_kib, cpu_s, and rc
(non-zero if the command failed). The caller adds the whole process's wall time.
"""

from __future__ import annotations

import time

# Taken before anything from fastgen is imported: the native variant's time includes its imports and setup.
_T0 = time.perf_counter()

import json  # noqa: E402
import os  # noqa: E402
import resource  # noqa: E402
import shutil  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402


def _native(p: dict) -> dict:
    """The original generator's way: one process, stdlib json re-serializing every span, a plain write per file."""
    from fastgen.cli import DEFAULT_MODEL
    from fastgen.generator.dataset import DatasetBuilder, file_name, tasks
    from fastgen.generator.native import native_session_bytes
    from fastgen.generator.scenarios import default_spec
    from fastgen.formats.tokenizer import load_tokenizer

    out = Path(p["out"])
    spec = default_spec().scaled(sessions=p["scale"], budgets=p["budget_scale"])
    # prepared as fastgen prepares it: the template count's proof and the window margin measured there decide bytes
    builder = DatasetBuilder(load_tokenizer("builtin"), spec, seed=p["seed"], model=DEFAULT_MODEL).prepare()
    made: set[str] = set()
    for task in tasks(spec):
        for plan in builder.plans_for(task):
            if plan.scenario not in made:
                (out / plan.scenario).mkdir(parents=True, exist_ok=True)
                made.add(plan.scenario)
            with open(out / plan.scenario / file_name(task.index), "wb") as f:
                f.write(native_session_bytes(plan, model=DEFAULT_MODEL, count=builder.count))
    return {"timed_s": time.perf_counter() - _T0, "rc": 0}


def _fastgen(p: dict) -> dict:
    """The real command, run exactly as `python -m fastgen ARGS` runs it (runpy), so its pool workers are this
    process's children and their peak RSS stays apart from the parent's."""
    import runpy

    sys.argv = ["fastgen", *p["argv"]]
    os.environ.update(p.get("env", {}))
    t = time.perf_counter()
    try:
        runpy.run_module("fastgen", run_name="__main__", alter_sys=True)
        rc = 0
    except SystemExit as exc:
        rc = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    result: dict = {"timed_s": time.perf_counter() - t, "rc": rc}
    if p.get("timings") and rc == 0:
        from fastgen.generator.timeline import read_timings

        # one clock for every process of the machine: each mark as seconds since this process started (_T0)
        result["marks"] = [(name, at - _T0) for name, at in read_timings(Path(p["timings"]))]
    return result


def _floor(p: dict) -> dict:
    """The same bytes written as fresh files by a plain loop (with `dontcache`, as uncached buffered writes, the way
    fastgen writes where the kernel has them): what the kernel alone costs for this dataset.

    The bytes are read into memory first (untimed); the source folder is then deleted and synced so neither its
    dirty pages nor its writeback overlap the timed loop, and the loop starts after settle_s seconds.
    """
    source, out = Path(p["source"]), Path(p["out"])
    t = time.perf_counter()
    files = [(rel, (source / rel).read_bytes()) for rel in p["files"]]
    read_s = time.perf_counter() - t
    shutil.rmtree(source)
    os.sync()
    time.sleep(p["settle_s"])  # the same settle time the other variants start after (launch.py)
    prepare_s = time.perf_counter() - t
    from fastgen.formats.writer import RWF_DONTCACHE  # Linux 6.14+, the flag fastgen's writer uses

    dontcache = p.get("dontcache", False) and _supports(out, RWF_DONTCACHE)
    cpu = _cpu(resource.getrusage(resource.RUSAGE_SELF))
    t = time.perf_counter()
    made: set[str] = set()
    for rel, data in files:
        folder = rel.rpartition("/")[0]
        if folder not in made:
            (out / folder).mkdir(parents=True, exist_ok=True)
            made.add(folder)
        if dontcache:
            _write_with_flags(out / rel, data, RWF_DONTCACHE)
        else:
            with open(out / rel, "wb") as f:
                f.write(data)
    # read_s and prepare_s (read, delete, sync, settle) are untimed context: a slow read_s means the page cache had
    # already dropped the source (read back from disk).
    timed_s = time.perf_counter() - t
    return {
        "timed_s": timed_s,
        "cpu_s": _cpu(resource.getrusage(resource.RUSAGE_SELF)) - cpu,
        "rc": 0,
        "read_s": read_s,
        "prepare_s": prepare_s,
        "settle_s": p["settle_s"],
        "dontcache": dontcache,
    }


def _cpu(usage) -> float:
    return usage.ru_utime + usage.ru_stime


def _write_with_flags(path: Path, data: bytes, flags: int) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666)
    try:
        view, offset = memoryview(data), 0
        while offset < len(data):
            offset += os.pwritev(fd, [view[offset:]], offset, flags)
    finally:
        os.close(fd)


def _supports(out: Path, flags: int) -> bool:
    if not hasattr(os, "pwritev"):
        return False
    out.mkdir(parents=True, exist_ok=True)
    probe = out / ".flags-probe"
    try:
        _write_with_flags(probe, b"x", flags)
        return True
    except OSError:
        return False
    finally:
        probe.unlink(missing_ok=True)


_KINDS = {"native": _native, "fastgen": _fastgen, "floor": _floor}


def main(argv: list[str]) -> int:
    job = json.loads(Path(argv[0]).read_text())
    result = _KINDS[job["kind"]](job["params"])
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    result["rss_kib"] = own.ru_maxrss
    result["children_rss_kib"] = children.ru_maxrss
    # user and system CPU of the process and every child it reaped (pool workers): the work a variant made the cores
    # do, which moves far less between runs than the wall time (the kernel's writeback threads are not in it); the
    # floor gives its timed loop's own
    result.setdefault("cpu_s", _cpu(own) + _cpu(children))
    Path(job["result"]).write_text(json.dumps(result))
    return result["rc"]


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
