"""Sample a server's Prometheus `/metrics` every few seconds while a config runs, into a JSON-lines file.

inference-perf's own Prometheus collection makes instant queries once, after the load; KV usage over a run, and
when preemptions happen, need a time series. Each line is `{"t": <epoch s>, "metrics": {sample: value}}` with the
engine's counters and gauges, summed over label sets (one model per server), or `{"t": ..., "error": "..."}` for
a scrape that failed. Behind a router (fleet.py) a line also holds each replica's own sample (`"replicas"`), and
`"metrics"` is the fleet's. Parsing is prometheus_client's.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Callable, Optional

from ..extras import import_extra

__all__ = ["MetricsSampler", "parse_metrics"]

_KEPT_TYPES = ("counter", "gauge")


def parse_metrics(text: str, prefix: str) -> dict[str, float]:
    """Counter and gauge samples whose name starts with `prefix` (e.g. "vllm:"), summed over their label sets."""
    parser = import_extra("prometheus_client.parser", extra="bakeoff", command="fastgen bakeoff")
    text_string_to_metric_families = parser.text_string_to_metric_families

    values: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        if family.type not in _KEPT_TYPES or not family.name.startswith(prefix):
            continue
        for sample in family.samples:
            if sample.name.endswith("_created"):  # a counter's creation time, not a value
                continue
            values[sample.name] = values.get(sample.name, 0.0) + float(sample.value)
    return dict(sorted(values.items()))


class MetricsSampler:
    """A background thread: `read()` every `interval_s` seconds (one sample: {"metrics": {...}, ...}, or an
    exception), appended to `path`, until stop(). `first` and `last` are the first and the last sample read."""

    def __init__(self, read: Callable[[], dict], path: Path, interval_s: float) -> None:
        self._read, self._path, self._interval = read, Path(path), interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="metrics-sampler", daemon=True)
        self.samples = 0
        self.errors = 0
        self.first: Optional[dict] = None
        self.last: Optional[dict] = None

    def start(self) -> "MetricsSampler":
        self._path.parent.mkdir(parents=True, exist_ok=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop after one last sample, so the run's end is covered too."""
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        with open(self._path, "w", encoding="utf-8") as out:
            while True:
                self._sample(out)
                if self._stop.wait(self._interval):
                    self._sample(out)
                    return

    def _sample(self, out) -> None:
        t = time.time()
        try:
            sample = self._read()
            line = {"t": t, **sample}
            self.samples += 1
            self.first, self.last = self.first or sample, sample
        except Exception as exc:  # noqa: BLE001 - a failed scrape is data (the server may be dying); go on
            line = {"t": t, "error": f"{type(exc).__name__}: {exc}"[:300]}
            self.errors += 1
        out.write(json.dumps(line, separators=(",", ":")) + "\n")
        out.flush()
