"""The `fastgen` command line's door (fastgen/cli/__init__.py), run as a real process: the version, a mistyped
command, --help's defaults, a missing extra named before any file is read, abbreviations refused, Ctrl-C as one line."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from _support.cli import _assert_nothing_written, _fastgen_env, _one_error_line, _paths
from conftest import SMALL, run_fastgen
from fastgen import __version__


def test_cli_version_prints_the_package_version():
    result = run_fastgen("--version")

    assert result.returncode == 0
    assert result.stdout.strip() == f"fastgen {__version__}"


def test_cli_mistyped_command_suggests_the_real_one(small_dataset):
    result = run_fastgen("validat", str(small_dataset / "traces"))

    assert result.returncode == 2
    assert "unknown command 'validat'; did you mean 'validate'?" in _one_error_line(result)


def test_cli_quiet_before_the_command_is_accepted(small_dataset):
    result = run_fastgen("--quiet", "validate", str(small_dataset / "traces"))

    assert result.returncode == 0, result.stderr
    assert "total" in result.stdout


def test_cli_help_shows_the_defaults():
    result = run_fastgen("--help")

    assert result.returncode == 0
    text = " ".join(result.stdout.split())  # argparse wraps lines
    assert "(default: 42)" in text and "(default: traces)" in text and "131072 in the default one" in text
    assert "--workload" in text and "fastgen workload show > my.yaml" in text
    assert "fastgen validate DIR" in text


def _help_entries(text: str) -> list[str]:
    """One string per option or positional of a --help page, its wrapped lines joined."""
    entries: list[str] = []
    for line in text.splitlines():
        if re.match(r"  \S", line):
            entries.append(line.strip())
        elif entries and line.startswith("    "):
            entries[-1] += " " + line.strip()
    return entries


@pytest.mark.parametrize(
    "command",
    [[], ["workload"], ["validate"], ["verify"], ["unpack"], ["bakeoff"], ["compare"], ["analyze"], ["export"]],
)
def test_cli_help_states_each_default_once_and_never_none(command):
    result = run_fastgen(*command, "--help")

    assert result.returncode == 0, result.stderr
    entries = _help_entries(result.stdout)
    assert any(e.startswith("-q, --quiet") for e in entries)
    for entry in entries:
        for empty in ("(default: None)", "(default: False)", "(default: [])"):
            assert empty not in entry, entry
        assert entry.count("(default") <= 1, entry


def _without(modules: str, tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    """fastgen run as if `modules` (comma-separated) were not installed: a sitecustomize sets them to None in
    sys.modules, in the command and in every process it spawns."""
    site = tmp_path / "site"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(
        f"import sys\nfor name in {modules.split(',')!r}:\n    sys.modules[name] = None\n"
    )
    path = os.pathsep.join(p for p in (str(site), os.environ.get("PYTHONPATH", "")) if p)
    return _fastgen_env(*args, env={"PYTHONPATH": path}, cwd=tmp_path)


_VALIDATE = "extra: pip install 'fastgen[validate]' (Python 3.12)"


@pytest.mark.parametrize(
    "hidden, args, says",
    [
        ("inference_perf", ["validate", "{traces}"], f"fastgen validate needs the validate {_VALIDATE}"),
        (
            "inference_perf",
            ["validate", "--trace", "{traces}/scenario1/session_0000.json"],
            f"fastgen validate needs the validate {_VALIDATE}",
        ),
        (
            "inference_perf",
            ["analyze", "{traces}", "--workers", "1"],
            f"fastgen analyze needs the validate {_VALIDATE}",
        ),
        (
            "inference_perf",
            ["export", "mooncake", "{traces}/scenario1", "--out", "{tmp}/out.jsonl"],
            f"fastgen export needs the validate {_VALIDATE}",
        ),
        (
            "inference_perf",
            [
                "bakeoff",
                "--url",
                "http://127.0.0.1:9",
                "--label",
                "x",
                "--config-dir",
                "{configs}",
                "--out",
                "{tmp}/reports",
            ],
            "fastgen bakeoff needs the bakeoff extra: pip install 'fastgen[bakeoff]' (Python 3.12)",
        ),
        (
            "prometheus_client",
            [
                "bakeoff",
                "--url",
                "http://127.0.0.1:9",
                "--label",
                "x",
                "--config-dir",
                "{configs}",
                "--out",
                "{tmp}/reports",
            ],
            "fastgen bakeoff needs the bakeoff extra: pip install 'fastgen[bakeoff]' (Python 3.12)",
        ),
        (
            "matplotlib",
            ["analyze", "{traces}", "--workers", "1", "--plots", "{tmp}/plots"],
            "fastgen analyze --plots needs the plots extra: pip install 'fastgen[plots]'",
        ),
    ],
)
def test_cli_missing_extra_is_named_before_any_file_is_read(small_dataset, tmp_path, hidden, args, says):
    paths = {"traces": small_dataset / "traces", "configs": small_dataset / "configs", "tmp": tmp_path}
    result = _without(hidden, tmp_path, *[a.format(**paths) for a in args])

    assert result.returncode == 1
    assert _one_error_line(result) == f"fastgen: error: {says}"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["site"]  # no report, plot, export or run folder


@pytest.mark.parametrize(
    "args, says",
    [
        (["--worker", "2"], "unrecognized arguments: --worker"),
        (["--base-url", "notaurl"], "--base-url must be an http(s) URL"),
        (["--prometheus-url", "localhost:9090"], "--prometheus-url must be an http(s) URL"),
        (["--level", "19"], "--level needs --compress zstd"),
    ],
)
def test_cli_abbreviations_bad_urls_and_a_lone_level_exit_2(tmp_path, args, says):
    result = run_fastgen(*SMALL, *args, *_paths(tmp_path))

    assert result.returncode == 2
    assert says in _one_error_line(result)
    _assert_nothing_written(tmp_path)


def test_cli_ctrl_c_while_importing_the_generator_is_one_line(tmp_path):
    # Deterministic: the interrupt arrives exactly when numpy, the first heavy import, starts loading.
    code = (
        "import builtins, os, signal, runpy, sys\n"
        "real = builtins.__import__\n"
        "def hook(name, *a, **k):\n"
        "    if name == 'numpy' and 'numpy' not in sys.modules:\n"
        "        builtins.__import__ = real\n"
        "        os.kill(os.getpid(), signal.SIGINT)\n"
        "    return real(name, *a, **k)\n"
        "builtins.__import__ = hook\n"
        f"sys.argv = ['fastgen', *{SMALL + _paths(tmp_path)!r}]\n"
        "runpy.run_module('fastgen', run_name='__main__', alter_sys=True)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)

    assert result.returncode == 130, result.stderr
    assert result.stderr == "fastgen: interrupted; the output was left as it was, with nothing partial\n"
    _assert_nothing_written(tmp_path)
