"""What a run prints (an aligned table, the scale check, the byte checks) and the JSON it writes."""

from __future__ import annotations

import json
import os
import platform
import sys
from pathlib import Path

__all__ = ["critical_path_table", "table", "summary_lines", "environment", "write_json"]

# (header, row key, format); a row without the key shows "-".
_COLUMNS = [
    ("variant", "variant", "{}"),
    ("wkrs", "workers", "{}"),
    ("wall s", "wall_s", "{:.3f}"),
    ("CPU s", "cpu_s", "{:.2f}"),
    ("MB", "mb", "{:,.0f}"),
    ("disk MB", "disk_mb", "{:,.0f}"),
    ("MB/s", "mb_s", "{:,.0f}"),
    ("files/s", "files_s", "{:,.0f}"),
    ("RSS MiB", "rss_mib", "{:,.0f}"),
    ("wkr RSS MiB", "worker_rss_mib", "{:,.0f}"),
    ("/floor", "over_floor", "{:.2f}"),
    ("native/", "native_over", "{:.2f}"),
    ("/builtin", "over_builtin", "{:.2f}"),
    ("zstd ratio", "zstd_ratio", "{:.1f}"),
    ("MB/s/wkr", "mb_s_per_worker", "{:,.0f}"),
]

_LEGEND = """\
wall s: whole process (start, imports, setup, work, exit); floor: its write loop only. Every variant starts
  --settle seconds after the previous output was deleted; floor-warm writes into memory freed moments before.
CPU s: user + system CPU of the process and its pool workers (floor: of its write loop); the kernel's writeback
  threads are in no row. fastgen-wK: cold (--no-cache); -warm: pools from the pool cache.
MB: uncompressed trace JSON made (10^6 bytes); disk MB: bytes written (compressed for zstd).
RSS MiB: peak of the process itself; wkr RSS MiB: largest pool worker (fastgen with >1 worker).
/floor: wall over the faster settled floor's (plain or uncached writes): how many times the bare writes it costs;
  native/: native's wall over this row's; /builtin: the large-vocabulary row's wall over the built-in tokenizer's.
zstd ratio: uncompressed / compressed; MB/s/wkr: uncompressed MB per second per worker.
analyze rows: `fastgen analyze --kv-cache-tokens 420000` of a dataset made above; MB: the trace bytes it read."""


def _cell(row: dict, key: str, fmt: str) -> str:
    value = row.get(key)
    return "-" if value is None else fmt.format(value)


def table(rows: list[dict]) -> str:
    cells = [[h for h, _, _ in _COLUMNS]] + [[_cell(r, key, fmt) for _, key, fmt in _COLUMNS] for r in rows]
    widths = [max(len(line[i]) for line in cells) for i in range(len(_COLUMNS))]

    def line(values: list[str]) -> str:  # names left-aligned, numbers right-aligned
        return "  ".join(v.ljust(w) if i == 0 else v.rjust(w) for i, (v, w) in enumerate(zip(values, widths)))

    rule = "  ".join("-" * w for w in widths)
    return "\n".join([line(cells[0]), rule, *map(line, cells[1:]), "", _LEGEND])


_PATH_LEGEND = """\
Each phase's seconds, in the order the parent ends them (fastgen --timings; one monotonic clock for every process):
command = interpreter, imports and parser; then the workload, the tokenizer, the checks, the staging folders, the
content pools (built, or read from the pool cache), the shared blocks, the count proof and margin (or the facts from
the cache). serial s: the process's start to its workers writing (one process's work: more cores cannot shorten it);
1st session s: to the first session's files written; pool s: the workers' span; finish s: manifest, configs, renames;
serial/floor: serial s over the faster settled floor's wall."""


def critical_path_table(rows: list[dict]) -> str:
    """The critical path of every fastgen row that recorded its phases; "" when none did."""
    timed = [r for r in rows if r.get("phases")]
    if not timed:
        return ""
    serial = [name for r in timed for name, _ in r["phases"]]
    serial = list(dict.fromkeys(serial[: serial.index("workers started")] if "workers started" in serial else []))
    headers = ["variant", "wkrs", *serial, "serial s", "1st session s", "pool s", "finish s", "serial/floor"]
    cells = [headers]
    for r in timed:
        own = dict(r["phases"])
        values = [own.get(name) for name in serial]
        values += [r.get(k) for k in ("serial_s", "first_session_s", "pool_s", "finish_s", "serial_over_floor")]
        cells.append([r["variant"], str(r["workers"]), *("-" if v is None else f"{v:.3f}" for v in values)])
    widths = [max(len(line[i]) for line in cells) for i in range(len(headers))]
    lines = [
        "  ".join(v.ljust(w) if i == 0 else v.rjust(w) for i, (v, w) in enumerate(zip(line, widths))) for line in cells
    ]
    return "\n".join(
        ["critical path (seconds)", lines[0], "  ".join("-" * w for w in widths), *lines[1:], "", _PATH_LEGEND]
    )


def summary_lines(doc: dict) -> list[str]:
    out = []
    scale = doc.get("scale_check")
    if scale:
        w1, wf = scale["worker_rss_mib"]
        p1, pf = scale["parent_rss_mib"]
        out.append(
            f"scale check: {scale['files_ratio']:.2f}x the files took {scale['wall_ratio']:.2f}x the wall time; "
            f"peak RSS per worker {w1:,.0f} -> {wf:,.0f} MiB ({scale['rss_ratio']:.2f}x), "
            f"parent {p1:,.0f} -> {pf:,.0f} MiB"
        )
    for row in doc["rows"]:
        if row["kind"] == "analyze":
            out.append(
                f"{row['variant']}: every config at one KV capacity in {row['wall_s']:.1f} s over "
                f"{row['files']:,} trace files; peak RSS main process {row['rss_mib']:,.0f} MiB, worker "
                f"{_cell(row, 'worker_rss_mib', '{:,.0f}')} MiB"
            )
    scaled = doc.get("analyze_scale_check")
    if scaled:
        (p1, pf), (w1, wf) = scaled["parent_rss_mib"], scaled["worker_rss_mib"]
        out.append(
            f"analyze scale check (every session of {scaled['directory']}): {scaled['files_ratio']:.2f}x "
            f"the files took {scaled['wall_ratio']:.2f}x the wall time; peak RSS main process {p1:,.0f} -> "
            f"{pf:,.0f} MiB, worker {w1:,.0f} -> {wf:,.0f} MiB"
        )
    warm = next((r for r in doc["rows"] if r["kind"] == "floor-warm"), None)
    fastest = min((r for r in doc["rows"] if r["kind"] == "fastgen"), key=lambda r: r["wall_s"], default=None)
    if warm and fastest:
        out.append(
            f"warm floor (memory freed moments before): {warm['wall_s']:.2f} s; {fastest['variant']} is "
            f"{fastest['over_warm_floor']:.2f}x that, {fastest['over_floor']:.2f}x the faster settled floor"
        )
    for check in doc["checks"]:
        if not check["equal"]:
            out.append(f"BYTES DIFFER in {check['variant']}: " + "; ".join(check["problems"]))
    sampled = [c["sampled"] for c in doc["checks"] if "sampled" in c]
    what = "plain outputs hashed whole" + (
        f", zstd outputs: {min(sampled)}+ files decompressed each" if sampled else ""
    )
    out.append(f"bytes_equal: {str(doc['bytes_equal']).lower()} ({what})")
    out.append(f"bench total: {doc['total_s']:.1f} s")
    return out


def environment() -> dict:
    """What the numbers depend on, recorded with them."""
    from fastgen import __version__

    def read(path: str) -> str | None:
        try:
            return Path(path).read_text().strip()
        except OSError:
            return None

    model = next(
        (
            line.split(":", 1)[1].strip()
            for line in (read("/proc/cpuinfo") or "").splitlines()
            if line.startswith("model name")
        ),
        platform.processor() or None,
    )
    return {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "cpu_model": model,
        "fastgen": __version__,
        "mem_total": (read("/proc/meminfo") or "").split("\n")[0].split(":")[-1].strip(),
        "vm_dirty_ratio": read("/proc/sys/vm/dirty_ratio"),
        "vm_dirty_background_ratio": read("/proc/sys/vm/dirty_background_ratio"),
    }


def write_json(path: Path, doc: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=1) + "\n")
