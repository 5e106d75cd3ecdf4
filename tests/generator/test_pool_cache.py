from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
import xxhash

from fastgen.generator import pool_cache
from fastgen.generator.content.compose import Composer
from fastgen.generator.content.kinds import KINDS
from fastgen.generator.pool_cache import PoolCache, cache_folder
from fastgen.generator.timeline import read_timings

from conftest import SMALL, run_fastgen


@pytest.fixture(scope="module")
def composer(builtin):
    return Composer(builtin, seed=5)


def test_cache_folder_follows_xdg_cache_home(monkeypatch):
    assert cache_folder({"XDG_CACHE_HOME": "/srv/cache"}) == Path("/srv/cache/fastgen/pools")
    # unset, empty or relative: the specification's default
    default = Path.home() / ".cache" / "fastgen" / "pools"
    assert cache_folder({}) == cache_folder({"XDG_CACHE_HOME": ""}) == cache_folder({"XDG_CACHE_HOME": "c"}) == default

    def no_home():
        raise RuntimeError("Could not determine home directory.")

    monkeypatch.setattr(Path, "home", no_home)
    assert cache_folder({}) is None
    monkeypatch.setattr(Path, "home", lambda: Path("/"))  # what HOME="" gives
    assert cache_folder({}) is None


def test_a_stored_pool_reads_back_and_composes_the_same_texts(tmp_path, composer, builtin):
    cache = PoolCache(tmp_path, builtin.identity.sha256, seed=5)
    assert cache.load("prose") is None
    built = composer.pool("prose")
    cache.store("prose", built)
    loaded = cache.load("prose")
    assert loaded.parts == built.parts and loaded.tail_plans == built.tail_plans and loaded.fillers == built.fillers
    other = Composer(builtin, seed=5)
    other.adopt_pool("prose", loaded)
    for n in (5, 300, 4000):
        assert other.fill("prose", n, np.random.default_rng(n)) == composer.fill("prose", n, np.random.default_rng(n))


def test_entries_are_keyed_by_tokenizer_seed_and_code(tmp_path, composer, builtin, monkeypatch):
    sha = builtin.identity.sha256
    PoolCache(tmp_path, sha, seed=5).store("tree", composer.pool("tree"))
    assert PoolCache(tmp_path, sha, seed=5).load("tree") is not None
    assert PoolCache(tmp_path, sha, seed=6).load("tree") is None
    assert PoolCache(tmp_path, "0" * 64, seed=5).load("tree") is None
    monkeypatch.setattr(pool_cache, "code_fingerprint", lambda: "an edited checkout")
    assert PoolCache(tmp_path, sha, seed=5).load("tree") is None


def _rewrite(path: Path, doc: dict) -> None:
    """An entry holding `doc`, with the hash of what it holds: only the shape checks can refuse it."""
    payload = json.dumps(doc).encode()
    path.write_bytes(xxhash.xxh3_128_hexdigest(payload).encode() + b"\n" + payload)


@pytest.mark.parametrize(
    "damage",
    [
        "truncated",
        "a digit changed",
        "not json",
        "other kind",
        "counts of another length",
        "a count that is text",
        "a count that is true",
        "a count of zero",
    ],
)
def test_a_damaged_entry_is_not_read(tmp_path, composer, builtin, damage):
    cache = PoolCache(tmp_path, builtin.identity.sha256, seed=5)
    cache.store("search", composer.pool("search"))
    path = cache.path("search")
    assert cache.load("search") is not None
    data = path.read_bytes()
    digest, _, payload = data.partition(b"\n")
    doc = json.loads(payload)
    if damage == "truncated":
        path.write_bytes(data[:1000])
    elif damage == "a digit changed":  # still JSON of the right shape: only the hash tells
        at = payload.index(b'"counts":[') + len(b'"counts":[')
        digit = payload[at : at + 1]
        path.write_bytes(digest + b"\n" + payload[:at] + (b"2" if digit == b"1" else b"1") + payload[at + 1 :])
    elif damage == "not json":
        junk = b"\x00" * 64
        path.write_bytes(xxhash.xxh3_128_hexdigest(junk).encode() + b"\n" + junk)
    else:
        if damage == "other kind":
            doc["kind"] = "prose"
        elif damage == "counts of another length":
            doc["counts"].pop()
        elif damage == "a count that is text":
            doc["filler_counts"][0] = "7"
        elif damage == "a count that is true":
            doc["filler_counts"][0] = True
        else:
            doc["counts"][3] = 0
        _rewrite(path, doc)
    assert cache.load("search") is None


def test_a_store_that_fails_leaves_no_temporary_file_and_ctrl_c_still_stops(tmp_path, composer, builtin, monkeypatch):
    cache = PoolCache(tmp_path, builtin.identity.sha256, seed=5)

    def broken(kind, pool):
        raise TypeError("not serializable")

    monkeypatch.setattr(pool_cache, "_entry_bytes", broken)
    cache.store("tree", composer.pool("tree"))  # no exception: no entry
    assert list(tmp_path.iterdir()) == []

    def interrupted(kind, pool):
        raise KeyboardInterrupt

    monkeypatch.setattr(pool_cache, "_entry_bytes", interrupted)
    with pytest.raises(KeyboardInterrupt):
        cache.store("tree", composer.pool("tree"))
    assert list(tmp_path.iterdir()) == []


def test_an_unwritable_folder_only_means_no_entry(tmp_path, composer, builtin):
    blocker = tmp_path / "file"
    blocker.write_text("a file where the folder would be")
    cache = PoolCache(blocker / "pools", builtin.identity.sha256, seed=5)
    cache.store("tree", composer.pool("tree"))  # no exception
    assert cache.load("tree") is None and blocker.read_text() == "a file where the folder would be"


def test_the_folder_keeps_the_most_recently_used_entries_and_nothing_else_is_touched(
    tmp_path, composer, builtin, monkeypatch
):
    monkeypatch.setattr(pool_cache, "_KEEP", 3)
    mine = tmp_path / "notes.txt"
    mine.write_text("the user's")
    cache = PoolCache(tmp_path, builtin.identity.sha256, seed=5)
    kinds = ["tree", "search", "logline", "guideline", "plan"]
    for age, kind in enumerate(kinds):
        cache.store(kind, composer.pool(kind))
        os.utime(cache.path(kind), ns=(10**18 + age, 10**18 + age))  # written in this order, whatever the clock says
    assert cache.load("tree") is not None  # the oldest, used now
    left_by_a_kill = tmp_path / ".plan-x1.part"
    left_by_a_kill.write_text("half an entry")
    os.utime(left_by_a_kill, (10**9, 10**9))
    being_written = tmp_path / ".plan-x2.part"
    being_written.write_text("another run's entry, being written")
    cache.trim()
    kept = ["tree", "guideline", "plan"]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [mine.name, being_written.name, *(cache.path(k).name for k in kept)]
    )


def test_a_warm_run_writes_the_same_bytes_and_no_cache_keeps_nothing(tmp_path, monkeypatch):
    def generate(name: str, cache: Path, *extra: str) -> bytes:
        monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
        out = tmp_path / name
        result = run_fastgen(
            *SMALL, "--workers", "2", "--output-dir", str(out / "traces"), "--config-dir", str(out / "configs"), *extra
        )
        assert result.returncode == 0, result.stderr
        return (out / "traces" / "manifest.json").read_bytes()

    shared = tmp_path / "cache"
    cold = generate("cold", shared)
    entries = sorted((shared / "fastgen" / "pools").iterdir())
    assert len(entries) == len(KINDS) + 1  # every pool, and the run's facts (its count proof and margin)
    files = [p.stat().st_ino for p in entries]
    assert generate("warm", shared) == cold
    assert [p.stat().st_ino for p in entries] == files  # read, not built and stored again (a new file)
    assert generate("uncached", tmp_path / "unused", "--no-cache") == cold
    assert not (tmp_path / "unused").exists()


def _phases(path: Path) -> list[str]:
    return [name for name, _ in read_timings(path)]


def test_a_later_run_takes_the_proof_and_margin_from_the_cache_and_a_damaged_entry_is_proved_again(
    tmp_path, monkeypatch
):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))

    def generate(name: str, *extra: str) -> tuple[bytes, list[str]]:
        out = tmp_path / name
        timings = tmp_path / f"{name}.json"
        result = run_fastgen(
            *SMALL, "--workers", "1", "--output-dir", str(out / "traces"), "--config-dir", str(out / "configs"),
            "--timings", str(timings), *extra,
        )  # fmt: skip
        assert result.returncode == 0, result.stderr
        return (out / "traces" / "manifest.json").read_bytes(), _phases(timings)

    cold, proved = generate("cold")
    assert "count proof" in proved and "facts from the cache" not in proved
    facts = sorted((tmp_path / "cache" / "fastgen" / "pools").glob("*-facts-*"))
    assert len(facts) == 1
    warm, adopted = generate("warm")
    assert warm == cold
    assert "facts from the cache" in adopted and "count proof" not in adopted
    # another workload is another set of facts: proved, not taken from the first
    _, other = generate("other", "--max-model-len", "65536")
    assert "count proof" in other
    assert len(sorted((tmp_path / "cache" / "fastgen" / "pools").glob("*-facts-*"))) == 2
    facts[0].write_bytes(facts[0].read_bytes().replace(b'"whole":false', b'"whole":true'))  # its hash no longer holds
    again, reproved = generate("again")
    assert again == cold and "count proof" in reproved
