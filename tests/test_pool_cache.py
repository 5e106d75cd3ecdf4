from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from fastgen import pool_cache
from fastgen.content.compose import Composer
from fastgen.content.kinds import KINDS
from fastgen.pool_cache import PoolCache, cache_folder

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


@pytest.mark.parametrize("damage", ["truncated", "not json", "other kind", "counts of another length", "a count "
                                    "that is text"])
def test_a_damaged_entry_is_not_read(tmp_path, composer, builtin, damage):
    cache = PoolCache(tmp_path, builtin.identity.sha256, seed=5)
    cache.store("search", composer.pool("search"))
    path = cache.path("search")
    doc = json.loads(path.read_bytes())
    if damage == "truncated":
        path.write_bytes(path.read_bytes()[:1000])
    elif damage == "not json":
        path.write_bytes(b"\x00" * 64)
    else:
        if damage == "other kind":
            doc["kind"] = "prose"
        elif damage == "counts of another length":
            doc["counts"].pop()
        else:
            doc["filler_counts"][0] = "7"
        path.write_text(json.dumps(doc))
    assert cache.load("search") is None


def test_an_unwritable_folder_only_means_no_entry(tmp_path, composer, builtin):
    blocker = tmp_path / "file"
    blocker.write_text("a file where the folder would be")
    cache = PoolCache(blocker / "pools", builtin.identity.sha256, seed=5)
    cache.store("tree", composer.pool("tree"))  # no exception
    assert cache.load("tree") is None and blocker.read_text() == "a file where the folder would be"


def test_the_folder_keeps_the_newest_entries_and_nothing_else_is_touched(tmp_path, composer, builtin, monkeypatch):
    monkeypatch.setattr(pool_cache, "_KEEP", 3)
    mine = tmp_path / "notes.txt"
    mine.write_text("the user's")
    cache = PoolCache(tmp_path, builtin.identity.sha256, seed=5)
    kinds = ["tree", "search", "logline", "guideline", "plan"]
    for age, kind in enumerate(kinds):
        cache.store(kind, composer.pool(kind))
        os.utime(cache.path(kind), ns=(10**18 + age, 10**18 + age))  # written in this order, whatever the clock says
    cache._trim()
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([mine.name, *(cache.path(k).name for k in kinds[2:])])


def test_a_warm_run_writes_the_same_bytes_and_no_cache_keeps_nothing(tmp_path, monkeypatch):
    def generate(name: str, cache: Path, *extra: str) -> bytes:
        monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
        out = tmp_path / name
        result = run_fastgen(*SMALL, "--workers", "2", "--output-dir", str(out / "traces"), "--config-dir",
                             str(out / "configs"), *extra)
        assert result.returncode == 0, result.stderr
        return (out / "traces" / "manifest.json").read_bytes()

    shared = tmp_path / "cache"
    cold = generate("cold", shared)
    entries = sorted((shared / "fastgen" / "pools").iterdir())
    assert len(entries) == len(KINDS)
    stamps = [p.stat().st_mtime_ns for p in entries]
    assert generate("warm", shared) == cold
    assert [p.stat().st_mtime_ns for p in entries] == stamps  # read, not built and stored again
    assert generate("uncached", tmp_path / "unused", "--no-cache") == cold
    assert not (tmp_path / "unused").exists()
