"""export/start_barrier.py: the common start of the Kubernetes replay's pods. The decision as a pure function, and
the script itself, as the ConfigMap carries it, run as several real processes sharing one folder."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest

from fastgen.export.kubernetes import KubernetesOptions, replay_manifests
from fastgen.bakeoff.shards import Shard
from fastgen.export.start_barrier import read_ready, start_decision


def _decide(ready: dict[int, float], count: int = 3, waited_s: float = 0.0):
    return start_decision(ready, count, waited_s=waited_s, margin_s=30.0, timeout_s=600.0)


def test_all_ready_starts_at_the_latest_reading_plus_the_margin_whatever_the_order_seen():
    ready = {0: 100.0, 2: 130.5, 1: 101.0}
    assert _decide(ready) == ("start", 160.5, ())
    assert _decide(dict(reversed(list(ready.items()))), waited_s=55.0) == ("start", 160.5, ())


def test_a_missing_pod_means_wait_and_after_the_timeout_give_up_naming_it():
    assert _decide({0: 1.0, 2: 2.0}) == ("wait", None, (1,))
    assert _decide({0: 1.0, 2: 2.0}, waited_s=600.0) == ("give up", None, (1,))


def test_files_of_indices_outside_the_replay_neither_fill_a_place_nor_move_the_start():
    assert _decide({0: 1.0, 1: 2.0, 5: 999.0}) == ("wait", None, (2,))
    assert _decide({0: 1.0, 1: 2.0, 2: 3.0, 5: 999.0}) == ("start", 33.0, ())


def test_read_ready_reads_pod_files_and_leaves_out_anything_else(tmp_path):
    (tmp_path / "pod-0").write_text("12.5")
    (tmp_path / "pod-1.part").write_text("13")  # half written: not yet renamed
    (tmp_path / "pod-x").write_text("14")
    (tmp_path / "pod-2").write_text("not a time")
    assert read_ready(str(tmp_path)) == {0: 12.5}
    assert read_ready(str(tmp_path / "absent")) == {}


def _script(tmp_path: Path) -> Path:
    """start.py as the pods get it: the ConfigMap's key, written out."""
    replay = {"otel_trace_replay": {"hf_dataset_path": {"path": "json", "data_files": "rows.jsonl"}}}
    shard = Shard(0, 1, (0,), {"load": {"stages": [{}]}, "data": replay})
    configmap = replay_manifests([shard], KubernetesOptions(name="x"))[0]
    path = tmp_path / "start.py"
    path.write_text(configmap["data"]["start.py"])
    return path


class _Resets(BaseHTTPRequestHandler):
    posts: list[str] = []
    seconds = 0.0  # how long a reset takes
    ended: list[float] = []

    def do_POST(self):  # noqa: N802 - http.server's name
        _Resets.posts.append(self.path)
        time.sleep(_Resets.seconds)
        _Resets.ended.append(time.time())
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture()
def reset_server():
    _Resets.posts, _Resets.ended, _Resets.seconds = [], [], 0.0
    server = HTTPServer(("127.0.0.1", 0), _Resets)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()


def _pods(script: Path, ready: Path, count: int, indices, *extra: str) -> list[subprocess.CompletedProcess]:
    load = "import time; print('load of pod {}', 'at', repr(time.time()))"
    procs = [
        subprocess.Popen(
            [sys.executable, str(script), "--ready-dir", str(ready), "--index", str(k), "--count", str(count)]
            + ["--margin", "0.5", "--poll", "0.05", *extra, "--", sys.executable, "-c", load.format(k)],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for k in indices
    ]
    return [subprocess.CompletedProcess(p.args, p.wait(timeout=120), p.stdout.read()) for p in procs]


def test_the_script_starts_every_pod_at_one_time_and_only_pod_0_resets(tmp_path, reset_server):
    ended = _pods(_script(tmp_path), tmp_path / "ready", 3, [2, 0, 1], "--reset", f"{reset_server}/reset_prefix_cache")
    assert [p.returncode for p in ended] == [0, 0, 0], [p.stdout for p in ended]
    starts = {
        line.split(" load starts at ")[1].split()[0]
        for p in ended
        for line in p.stdout.splitlines()
        if "starts at" in line
    }
    assert len(starts) == 1  # one start time, computed by each from the same files
    assert [f"load of pod {k}" in p.stdout for k, p in zip([2, 0, 1], ended)] == [True] * 3  # then its command
    assert _Resets.posts == ["/reset_prefix_cache"]  # once, by pod 0


def test_no_pod_starts_its_load_before_pod_0_has_emptied_the_cache_however_long_that_takes(tmp_path, reset_server):
    _Resets.seconds = 2.0  # longer than the margin: a reset after the barrier would still be running at the start
    ended = _pods(_script(tmp_path), tmp_path / "ready", 3, [1, 2, 0], "--reset", f"{reset_server}/flush_cache")
    assert [p.returncode for p in ended] == [0, 0, 0], [p.stdout for p in ended]
    loads = [float(line.split(" at ")[1]) for p in ended for line in p.stdout.splitlines() if "load of pod" in line]
    assert len(loads) == 3 and len(_Resets.ended) == 1
    assert min(loads) >= _Resets.ended[0]


def test_the_script_gives_up_when_a_pod_never_comes_and_runs_nothing(tmp_path):
    (ended,) = _pods(_script(tmp_path), tmp_path / "ready", 2, [0], "--timeout", "0.3")
    assert ended.returncode == 1 and "pods [1] not ready" in ended.stdout and "load of pod" not in ended.stdout


def test_a_reset_that_fails_ends_every_pod_before_its_load(tmp_path):
    other, pod0 = _pods(_script(tmp_path), tmp_path / "ready", 2, [1, 0], "--reset", "http://127.0.0.1:9/reset")
    assert pod0.returncode == 1 and "cannot reset the cache at http://127.0.0.1:9/reset" in pod0.stdout
    assert other.returncode == 1 and "pod 0 could not empty the engine's cache" in other.stdout  # not an hour's wait
    assert "load of pod" not in other.stdout + pod0.stdout
