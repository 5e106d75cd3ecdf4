"""Throughputs and ratios from the measured rows. Ratios, not absolute times, are what carries between machines:
every row ran back to back on the same disk, cores and page cache.

MB is 10^6 bytes of uncompressed trace JSON (what was generated); disk MB is what was written (the compressed size
for zstd). RSS is MiB.
"""

from __future__ import annotations

__all__ = ["analyze_scale_summary", "critical_path", "derive", "scale_summary"]

_MB = 1e6
_GENERATORS = ("native", "fastgen", "fastgen-warm")  # rows compared with the floor; all but native with native too


def _find(rows: list[dict], kind: str) -> dict | None:
    """The row of a kind; of several (the settled floors: plain and uncached writes), the fastest."""
    return min((r for r in rows if r["kind"] == kind), key=lambda r: r["wall_s"], default=None)


def derive(rows: list[dict]) -> None:
    """Add to each row: mb, disk_mb, mb_s, files_s, and where they apply
    over_floor   wall / the faster settled floor's (native and fastgen rows, cold and warm: 1.0 would be as fast as the
                 kernel's writes)
    over_warm_floor  the same against the floor written into warm memory (only with --settle; see launch.py)
    native_over  native's wall / this wall (fastgen rows: the speedup over the original generator)
    zstd_ratio   uncompressed / compressed bytes, and mb_s_per_worker = uncompressed MB / wall / workers
    over_builtin the large-vocabulary row's wall / the built-in tokenizer's fastgen row at the same workers."""
    floor, warm, native = _find(rows, "floor"), _find(rows, "floor-warm"), _find(rows, "native")
    builtin = {r["workers"]: r for r in rows if r["kind"] == "fastgen"}
    for r in rows:
        r["mb"], r["disk_mb"] = r["bytes"] / _MB, r["disk_bytes"] / _MB
        r["mb_s"] = r["mb"] / r["wall_s"]
        r["files_s"] = r["files"] / r["wall_s"]
        if floor and r["kind"] in _GENERATORS:
            r["over_floor"] = r["wall_s"] / floor["wall_s"]
        if warm and r["kind"] in _GENERATORS:
            r["over_warm_floor"] = r["wall_s"] / warm["wall_s"]
        if native and r["kind"] in _GENERATORS[1:]:
            r["native_over"] = native["wall_s"] / r["wall_s"]
        if r["kind"] == "vocab" and r["workers"] in builtin:
            r["over_builtin"] = r["wall_s"] / builtin[r["workers"]]["wall_s"]
        if r["zstd_level"] is not None:
            r["zstd_ratio"] = r["bytes"] / r["disk_bytes"]
            r["mb_s_per_worker"] = r["mb"] / r["wall_s"] / r["workers"]
        if r.get("marks"):
            r.update(critical_path(r["marks"], floor["wall_s"] if floor else None))


def critical_path(marks: list, floor_s: float | None) -> dict:
    """From a fastgen row's marks (each phase's end, seconds since its process started): each phase's own seconds,
    and the critical path's milestones. serial_s is everything before the workers write (interpreter, imports,
    workload, tokenizer, checks, pools, proof, margin): one process's work, which more cores cannot shorten;
    first_session_s the first session's files written; pool_s the workers' span; finish_s the manifest, configs and
    renames after them; serial_over_floor serial_s over the write floor's wall."""
    at = dict(marks)
    phases, previous = [], 0.0
    for name, t in marks:
        phases.append((name, t - previous))
        previous = t
    serial = at.get("workers started")
    path = {
        "phases": phases,
        "serial_s": serial,
        "first_session_s": at.get("first session written"),
        "pool_s": at["pool"] - serial if serial is not None and "pool" in at else None,
        "finish_s": at["placed"] - at["pool"] if "placed" in at and "pool" in at else None,
    }
    if floor_s and serial is not None:
        path["serial_over_floor"] = serial / floor_s
    return path


def _per_worker_rss(row: dict) -> float:
    # With one worker fastgen works in its own process: that process is the worker.
    return row["worker_rss_mib"] if row["worker_rss_mib"] is not None else row["rss_mib"]


def _scaled(rows: list[dict], kind: str, factor: float) -> tuple[dict, dict, dict] | None:
    """The 1x and the F-times row of a scale check (None unless both ran), and what both checks report of them."""
    scaled = [r for r in rows if r["kind"] == kind]
    if len(scaled) != 2:
        return None
    one, big = scaled
    ratios = {
        "factor": factor,
        "directory": one.get("directory"),
        "files_ratio": big["files"] / one["files"],
        "wall_ratio": big["wall_s"] / one["wall_s"],
    }
    return one, big, ratios


def scale_summary(rows: list[dict], factor: float) -> dict | None:
    """F times the sessions should take ~F times as long with flat memory per worker."""
    if (scaled := _scaled(rows, "scale", factor)) is None:
        return None
    one, big, ratios = scaled
    return {
        **ratios,
        "worker_rss_mib": [_per_worker_rss(one), _per_worker_rss(big)],
        "parent_rss_mib": [one["rss_mib"], big["rss_mib"]],
        "rss_ratio": _per_worker_rss(big) / _per_worker_rss(one),
    }


def analyze_scale_summary(rows: list[dict], factor: float) -> dict | None:
    """`fastgen analyze` of every session of one trace directory at 1x and F times the sessions: the wall time and
    the peak memory of its main process (the sessions running at once and the index of distinct blocks, never the
    corpus) and of its reading workers."""
    if (scaled := _scaled(rows, "analyze-scale", factor)) is None:
        return None
    one, big, ratios = scaled
    return {
        **ratios,
        "parent_rss_mib": [one["rss_mib"], big["rss_mib"]],
        "worker_rss_mib": [_per_worker_rss(one), _per_worker_rss(big)],
    }
