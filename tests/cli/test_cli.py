"""The `fastgen` command line, run as a real process: exit codes, one-line errors, validate, what it prints."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import SMALL, run_fastgen, trace_files
from fastgen import __version__
from fastgen.formats.tokenizer import BUILTIN_DIR


def _fastgen_env(*args: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess:
    # conftest's run_fastgen inherits the environment; the default-tokenizer case needs its own HF cache.
    return subprocess.run(
        [sys.executable, "-m", "fastgen", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**os.environ, **env},
        timeout=600,
    )


def _paths(tmp_path: Path) -> list[str]:
    return ["--output-dir", str(tmp_path / "traces"), "--config-dir", str(tmp_path / "configs")]


def _one_error_line(result) -> str:
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("fastgen: error: "), lines[0]
    return lines[0]


def _assert_nothing_written(tmp_path: Path) -> None:
    assert not (tmp_path / "traces").exists()
    assert not (tmp_path / "configs").exists()
    assert not [p for p in tmp_path.iterdir() if ".fastgen-" in p.name]


@pytest.mark.parametrize(
    "option, value",
    [
        ("--seed", "-1"),
        ("--seed", "abc"),
        ("--workers", "0"),
        ("--scale", "0"),
        ("--budget-scale", "-1"),
        ("--max-model-len", "10"),
    ],
)
def test_cli_bad_number_exits_2_with_one_line_naming_the_option(tmp_path, option, value):
    result = run_fastgen(*SMALL, option, value, *_paths(tmp_path))

    assert result.returncode == 2
    assert option in _one_error_line(result)
    _assert_nothing_written(tmp_path)


def test_cli_unknown_server_type_exits_2_naming_the_supported_ones(tmp_path):
    result = run_fastgen(*SMALL, "--server-type", "tgi", *_paths(tmp_path))

    assert result.returncode == 2
    line = _one_error_line(result)
    assert "vllm" in line and "sglang" in line
    _assert_nothing_written(tmp_path)


def test_cli_spec_that_cannot_fit_exits_2_before_writing(tmp_path):
    # Full budgets on purpose: the scaled-down ones fit almost any window.
    result = run_fastgen("--tokenizer", "builtin", "--quiet", "--max-model-len", "50000", *_paths(tmp_path))

    assert result.returncode == 2
    assert "--max-model-len" in _one_error_line(result)
    _assert_nothing_written(tmp_path)


def test_cli_tokenizer_path_missing_exits_1_pointing_at_builtin(tmp_path):
    args = [a for a in SMALL if a not in ("--tokenizer", "builtin")]
    result = run_fastgen(*args, "--tokenizer", "/nonexistent/path", *_paths(tmp_path))

    assert result.returncode == 1
    assert "--tokenizer builtin" in _one_error_line(result)
    _assert_nothing_written(tmp_path)


def test_cli_default_tokenizer_not_in_cache_exits_1_pointing_at_builtin(tmp_path):
    # No --tokenizer means --model's tokenizer; an empty cache must stop the run, never fall back to builtin.
    hub = tmp_path / "empty-hub"
    hub.mkdir()
    args = [a for a in SMALL if a not in ("--tokenizer", "builtin")]
    result = _fastgen_env(*args, *_paths(tmp_path), env={"HF_HUB_CACHE": str(hub)}, cwd=tmp_path)

    assert result.returncode == 1
    line = _one_error_line(result)
    assert "--tokenizer builtin" in line and "meta-llama/Llama-3.3-70B-Instruct" in line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty-hub"]


@pytest.mark.parametrize(
    "content", [b"{ this is not json", json.dumps({"model": {"type": "BPE"}}).encode()], ids=["not_json", "no_vocab"]
)
def test_cli_broken_tokenizer_json_exits_1_with_one_line(tmp_path, content):
    broken = tmp_path / "tokenizer.json"
    broken.write_bytes(content)
    args = [a for a in SMALL if a not in ("--tokenizer", "builtin")]

    result = run_fastgen(*args, "--tokenizer", str(broken), *_paths(tmp_path))

    assert result.returncode == 1
    assert str(broken) in _one_error_line(result)
    _assert_nothing_written(tmp_path)


def test_cli_version_prints_the_package_version():
    result = run_fastgen("--version")

    assert result.returncode == 0
    assert result.stdout.strip() == f"fastgen {__version__}"


@pytest.mark.parametrize("quiet", [False, True], ids=["loud", "quiet"])
def test_cli_generate_prints_tokenizer_unless_quiet(tmp_path, quiet):
    builtin_sha = hashlib.sha256((BUILTIN_DIR / "tokenizer.json").read_bytes()).hexdigest()
    args = [a for a in SMALL if a != "--quiet"] + (["--quiet"] if quiet else [])

    result = run_fastgen(*args, "--workers", "1", *_paths(tmp_path))

    assert result.returncode == 0, result.stderr
    manifest = json.loads((tmp_path / "traces" / "manifest.json").read_bytes())
    assert manifest["tokenizer"]["sha256"] == builtin_sha
    if quiet:
        assert result.stderr == ""
    else:
        assert re.search(rf"tokenizer builtin \(sha256 {builtin_sha[:12]}\b", result.stderr), result.stderr


def test_cli_validate_generated_dataset_exits_0_with_total_row(small_dataset):
    result = run_fastgen("validate", str(small_dataset / "traces"))

    assert result.returncode == 0, result.stdout + result.stderr
    total = [line.split() for line in result.stdout.splitlines() if line.startswith("total")]
    assert len(total) == 1, result.stdout
    files, ok, failed = int(total[0][1]), int(total[0][3]), int(total[0][4])
    assert files == len(trace_files(small_dataset / "traces")) and ok == files and failed == 0


def test_cli_validate_one_scenario1_trace_verbose_shows_six_events(small_dataset):
    trace = sorted((small_dataset / "traces" / "scenario1").glob("session_*.json"))[0]

    result = run_fastgen("validate", "--trace", str(trace), "--verbose")

    assert result.returncode == 0, result.stdout + result.stderr
    assert "events=6" in result.stdout
    assert len(re.findall(r"^event \d ", result.stdout, flags=re.M)) == 6
    assert "deviations: none" in result.stdout


def test_cli_validate_branch_without_root_output_exits_1(small_dataset, tmp_path):
    source = sorted((small_dataset / "traces" / "scenario2_sync").glob("session_*.json"))[0]
    folder = tmp_path / "scenario2_sync"
    folder.mkdir()
    shutil.copy(source, folder / "session_0000.json")
    doc = json.loads(source.read_bytes())
    # Without the root's answer in its input, inference-perf cannot feed the live output forward to the branch.
    root_text = json.loads(doc["spans"][0]["attributes"]["gen_ai.output.messages"])[0]["parts"][0]["content"]
    branch = doc["spans"][-1]["attributes"]
    messages = json.loads(branch["gen_ai.input.messages"])
    kept = [m for m in messages if not (m["role"] == "assistant" and m.get("content") == root_text)]
    assert len(kept) == len(messages) - 1
    branch["gen_ai.input.messages"] = json.dumps(kept)
    (folder / "session_0001.json").write_text(json.dumps(doc))

    result = run_fastgen("validate", str(tmp_path))

    assert result.returncode == 1, result.stdout + result.stderr
    total = [line.split() for line in result.stdout.splitlines() if line.startswith("total")]
    assert (int(total[0][3]), int(total[0][4])) == (1, 1), result.stdout
    assert "session_0001.json: event 5: segments shared(<-0) unique, expected" in result.stdout, result.stdout


def test_cli_start_up_line_names_the_model_and_warns_of_a_tokenizer_with_the_default_model(tmp_path):
    folder = tmp_path / "my-tokenizer"
    shutil.copytree(BUILTIN_DIR, folder)
    args = [a for a in SMALL if a not in ("--tokenizer", "builtin", "--quiet")]

    default_model = run_fastgen(*args, "--tokenizer", str(folder), "--workers", "1", *_paths(tmp_path))
    # a model of no known family: a Qwen/ one would be told that the built-in tokenizer does not count as its server
    own_model = run_fastgen(
        *args, "--tokenizer", str(folder), "--model", "my-org/my-model", "--workers", "1", "--force", *_paths(tmp_path)
    )

    assert default_model.returncode == 0 and own_model.returncode == 0, default_model.stderr + own_model.stderr
    assert "model meta-llama/Llama-3.3-70B-Instruct" in default_model.stderr
    warning = [line for line in default_model.stderr.splitlines() if line.startswith("fastgen: warning: ")]
    assert len(warning) == 1 and "--model" in warning[0] and str(folder) in warning[0], default_model.stderr
    assert "model my-org/my-model" in own_model.stderr and "warning" not in own_model.stderr


def test_cli_tokenizer_without_chat_template_warns_even_when_quiet(tmp_path):
    folder = tmp_path / "plain"
    folder.mkdir()
    shutil.copy(BUILTIN_DIR / "tokenizer.json", folder / "tokenizer.json")
    args = [a for a in SMALL if a not in ("--tokenizer", "builtin")]

    result = run_fastgen(
        *args, "--tokenizer", str(folder), "--model", "local/plain", "--workers", "1", *_paths(tmp_path)
    )

    assert result.returncode == 0, result.stderr
    (line,) = result.stderr.splitlines()
    assert line.startswith("fastgen: warning: ") and "no chat template" in line


@pytest.mark.parametrize(
    "name, says",
    [
        ("./qwen", "tokenizer path ./qwen does not exist"),
        ("Qwen/Qwen3-32B", "hub id 'Qwen/Qwen3-32B' is not in the local Hugging Face cache"),
    ],
)
def test_cli_missing_tokenizer_tells_a_mistyped_path_from_an_uncached_hub_id(tmp_path, name, says):
    hub = tmp_path / "empty-hub"
    hub.mkdir()
    args = [a for a in SMALL if a not in ("--tokenizer", "builtin")]

    result = _fastgen_env(*args, "--tokenizer", name, *_paths(tmp_path), env={"HF_HUB_CACHE": str(hub)}, cwd=tmp_path)

    assert result.returncode == 1
    line = _one_error_line(result)
    assert says in line, line
    assert ("huggingface-cli download" in line) == ("/" in name and not name.startswith("."))


def _metrics(config_dir: Path) -> dict:
    import yaml

    return yaml.safe_load((config_dir / "scenario1" / "c1.yml").read_text())["metrics"]


def test_cli_metrics_are_default_unless_a_prometheus_url_is_given(tmp_path):
    plain = run_fastgen(*SMALL, "--workers", "1", *_paths(tmp_path / "a"))
    with_prometheus = run_fastgen(
        *SMALL, "--workers", "1", "--prometheus-url", "http://prom:9090", *_paths(tmp_path / "b")
    )

    assert plain.returncode == 0 and with_prometheus.returncode == 0, plain.stderr + with_prometheus.stderr
    assert _metrics(tmp_path / "a" / "configs") == {"type": "default"}
    assert _metrics(tmp_path / "b" / "configs") == {
        "type": "prometheus",
        "prometheus": {"url": "http://prom:9090", "scrape_interval": 15},
    }


def test_cli_start_up_line_says_which_metrics_the_configs_collect(tmp_path):
    args = [a for a in SMALL if a != "--quiet"]

    result = run_fastgen(*args, "--workers", "1", *_paths(tmp_path))

    assert result.returncode == 0, result.stderr
    assert "metrics: default (no Prometheus queries; give --prometheus-url" in result.stderr.splitlines()[0]


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


def test_compare_refuses_a_report_it_did_not_write_in_one_line_and_force_keeps_it(tmp_path):
    for side, cached in (("a", 900), ("b", 300)):
        folder = tmp_path / side / "scenario1" / "c2" / "repeat-1"
        folder.mkdir(parents=True)
        usage = {"prompt_tokens": 1000, "prompt_tokens_details": {"cached_tokens": cached}}
        (folder / "per_request_lifecycle_metrics.json").write_text(
            json.dumps(
                [
                    {
                        "start_time": float(i),
                        "end_time": i + 0.5,
                        "error": None,
                        "info": {
                            "labels": {"session": f"s{i}", "turn": "1", "turn_kind": "text"},
                            "response_metrics": {"server_usage": usage},
                        },
                        "computed_metrics": {"time_to_first_token": 0.1, "request_latency": 0.5, "output_tokens": 10},
                    }
                    for i in range(3)
                ]
            )
        )
    out = tmp_path / "report"
    out.mkdir()
    (out / "report.md").write_text("my edits\n")
    refused = run_fastgen("compare", str(tmp_path / "a"), str(tmp_path / "b"), "--out", str(out), "--no-plots")
    assert refused.returncode == 1 and _one_error_line(refused) == (
        f"fastgen: error: {out / 'report.md'} was not written by fastgen compare (or was edited since); move it "
        f"away, choose another --out, or pass --force to keep it as report.md.edited and write the new one"
    )
    assert (out / "report.md").read_text() == "my edits\n" and not (out / "report.json").exists()
    forced = run_fastgen(
        "compare", str(tmp_path / "a"), str(tmp_path / "b"), "--out", str(out), "--no-plots", "--force"
    )
    assert forced.returncode == 0, forced.stderr
    assert (out / "report.md.edited").read_text() == "my edits\n"
    assert "# Bakeoff report" in (out / "report.md").read_text()
    assert f"kept the file that was there as {out / 'report.md.edited'}" in forced.stderr


def _start_up_line(stderr: str) -> str:
    (line,) = [line for line in stderr.splitlines() if line.startswith("fastgen ")]
    return line


def _warnings(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("fastgen: warning: ")]


def _input_tokens(traces: Path) -> list[int]:
    return [
        span["attributes"]["gen_ai.usage.input_tokens"]
        for path in trace_files(traces)
        for span in json.loads(path.read_bytes())["spans"]
    ]


def test_cli_tokenizer_without_template_says_content_counts_margin_and_what_it_lacks(tmp_path):
    from templates import without_template

    folder = without_template(tmp_path / "my-qwen")
    args = [a for a in SMALL if a not in ("--tokenizer", "builtin", "--quiet")]

    result = run_fastgen(
        *args, "--tokenizer", str(folder), "--model", "Qwen/Qwen3-32B", "--workers", "1", *_paths(tmp_path)
    )

    assert result.returncode == 0, result.stderr
    assert _start_up_line(result.stderr).endswith(
        f"; content tokens only: {folder} has no chat template; the window check allows for what the shipped "
        "template qwen (Qwen, --model's family) renders around the content, measured on the first 8 sessions of "
        "each scenario"
    )
    no_template, mismatch, lacking = _warnings(result.stderr)
    assert "no chat template" in no_template and "--chat-template FILE" in no_template
    assert "a template fastgen ships (qwen: Qwen2.5 and Qwen3" in no_template and "llama3: Llama 3.1" in no_template
    assert mismatch.endswith(
        "counts will not match Qwen/Qwen3-32B's server (tokenizer "
        f"{folder} has 32,768 tokens before its added ones, Qwen models 151,643): pass "
        "--tokenizer <folder of Qwen/Qwen3-32B>"
    )
    assert (
        "lacks the special tokens <|im_start|>, <|im_end|> (Qwen's chat template renders them); <tool_call>, "
        "</tool_call> (vllm's tool-call parser hermes finds tool calls by them)"
    ) in lacking


def test_cli_chat_template_counts_prompts_with_it_and_records_and_ships_it(tmp_path):
    from templates import builtin_template, without_template

    folder = without_template(tmp_path / "my-qwen")
    template = tmp_path / "chatml.jinja"
    template.write_text(builtin_template())
    args = [a for a in SMALL if a not in ("--tokenizer", "builtin", "--quiet")]
    common = [*args, "--tokenizer", str(folder), "--model", "my-org/my-qwen", "--workers", "1"]

    content = run_fastgen(*common, *_paths(tmp_path / "content"))
    templated = run_fastgen(*common, "--chat-template", str(template), *_paths(tmp_path / "templated"))

    assert content.returncode == 0 and templated.returncode == 0, content.stderr + templated.stderr
    sha = hashlib.sha256(template.read_bytes()).hexdigest()
    assert _start_up_line(templated.stderr).endswith(
        f"; prompts counted as --chat-template chatml.jinja (sha256 {sha[:12]}) renders them"
    )
    assert "no chat template" not in templated.stderr
    (lacking,) = _warnings(templated.stderr)
    assert "<|im_start|>, <|im_end|> (its chat template renders them)" in lacking
    traces = tmp_path / "templated" / "traces"
    manifest = json.loads((traces / "manifest.json").read_text())
    assert manifest["tokenizer"]["chat_template"] == {"name": "chatml.jinja", "sha256": sha}
    assert manifest["tokenizer"]["count"] == "template" and manifest["arguments"]["chat_template"] == str(template)
    assert (traces / "tokenizer" / "chat_template.jinja").read_bytes() == template.read_bytes()
    # the prompts as the template renders them: every span counts more than its content alone
    assert all(
        t > c for t, c in zip(_input_tokens(traces), _input_tokens(tmp_path / "content" / "traces"), strict=True)
    )


@pytest.mark.parametrize(
    "name, content, says",
    [
        ("missing.jinja", None, "does not exist"),
        ("broken.jinja", "{% if tools %}<|im_start|>", "is not valid Jinja (line 1"),
    ],
)
def test_cli_bad_chat_template_file_is_one_line_naming_it(tmp_path, name, content, says):
    path = tmp_path / name
    if content is not None:
        path.write_text(content)

    result = run_fastgen(*SMALL, "--chat-template", str(path), *_paths(tmp_path))

    assert result.returncode == 1
    line = _one_error_line(result)
    assert f"chat template {path} {says}" in line and "pass --chat-template a Jinja chat template file" in line
    assert not (tmp_path / "traces").exists()
