"""`fastgen` generating a dataset (fastgen/cli/generate.py), run as a real process: bad numbers and specs refused in one
line before anything is written, the tokenizer and chat template it names, its start-up line, its metrics."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from pathlib import Path

import pytest

from _support.cli import _assert_nothing_written, _fastgen_env, _one_error_line, _paths
from conftest import SMALL, run_fastgen, trace_files
from fastgen.formats.tokenizer import BUILTIN_DIR


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
