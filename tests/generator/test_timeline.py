"""--timings: where a run's wall time went, on one monotonic clock, and never a byte of the dataset."""

from __future__ import annotations


from conftest import SMALL, run_fastgen
from fastgen.generator.timeline import Timeline, read_timings

# The parent's phases in the order it ends them (workers=2: the free-space estimate runs while the workers write)
SERIAL = ["command", "workload", "tokenizer", "checks", "staging", "pools", "shared blocks"]
AFTER = ["workers started", "space check", "pool", "manifest", "configs", "placed"]


def test_a_run_with_timings_writes_the_phases_in_order_and_the_same_bytes(tmp_path):
    def generate(name: str, *extra: str) -> bytes:
        out = tmp_path / name
        result = run_fastgen(
            *SMALL, "--workers", "2", "--output-dir", str(out / "traces"), "--config-dir", str(out / "configs"), *extra
        )
        assert result.returncode == 0, result.stderr
        return (out / "traces" / "manifest.json").read_bytes()

    timings = tmp_path / "timings.json"
    assert generate("timed", "--no-cache", "--timings", str(timings)) == generate("plain", "--no-cache")
    marks = read_timings(timings)
    names = [name for name, _ in marks]
    assert names[: len(SERIAL)] == SERIAL
    assert names[len(SERIAL) : len(SERIAL) + 3] == ["count proof", "margin", "workers started"]
    assert [n for n in names if n in AFTER] == AFTER
    assert names.count("first session written") == 1
    assert names.index("workers started") < names.index("first session written") < names.index("pool")
    times = [t for _, t in marks]
    assert times == sorted(times)  # one monotonic clock


def test_once_marks_only_the_first_time_and_the_document_reads_back(tmp_path):
    timeline = Timeline()
    timeline.mark("a")
    timeline.once("first")
    timeline.once("first")
    timeline.mark("b")
    path = tmp_path / "t.json"
    path.write_bytes(timeline.document())
    assert [name for name, _ in read_timings(path)] == ["a", "first", "b"]


def test_timings_into_a_folder_that_does_not_exist_is_refused_before_anything_is_written(tmp_path):
    out, configs = tmp_path / "out", tmp_path / "configs"
    timings = tmp_path / "missing" / "t.json"
    result = run_fastgen(*SMALL, "--output-dir", str(out), "--config-dir", str(configs), "--timings", str(timings))
    assert result.returncode == 2
    assert result.stderr.startswith("fastgen: error: --timings") and len(result.stderr.splitlines()) == 1
    assert not out.exists() and not configs.exists()
