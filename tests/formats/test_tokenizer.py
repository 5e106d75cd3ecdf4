from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from fastgen.generator.content.compose import Composer
from fastgen.errors import TokenizerError
from fastgen.formats.tokenizer import BUILTIN_DIR, load_tokenizer


def test_load_tokenizer_builtin_is_a_32k_byte_level_bpe(builtin):
    assert builtin.identity.vocab_size >= 32000
    assert builtin.identity.source == "builtin"
    data = json.loads((BUILTIN_DIR / "tokenizer.json").read_text())
    assert data["model"]["type"] == "BPE"
    assert data["pre_tokenizer"]["pretokenizers"][0]["type"] == "Split"
    assert builtin.decode(builtin.encode("def f(x):\n    return x  # é ✓\n")) == "def f(x):\n    return x  # é ✓\n"


def test_builtin_chars_per_token_on_real_code_is_in_the_llm_range(builtin):
    source = (Path(np.__file__).parent / "_core" / "numeric.py").read_text()  # real code, not in the corpus
    ratio = len(source) / builtin.count(source)
    assert 3.0 <= ratio <= 5.0, ratio


def test_builtin_probe_finds_joins_additive(builtin):
    assert builtin.additive


def test_load_tokenizer_file_and_folder_give_the_same_identity(tmp_path):
    (tmp_path / "tokenizer.json").write_bytes((BUILTIN_DIR / "tokenizer.json").read_bytes())
    by_file = load_tokenizer(str(tmp_path / "tokenizer.json"))
    by_folder = load_tokenizer(str(tmp_path))
    assert by_file.identity.sha256 == by_folder.identity.sha256 == load_tokenizer("builtin").identity.sha256


def test_load_tokenizer_hub_id_resolves_through_the_local_cache(tmp_path, monkeypatch):
    snap = tmp_path / "hub" / "models--acme--coder-7b" / "snapshots" / "abc123"
    snap.mkdir(parents=True)
    (snap / "tokenizer.json").write_bytes((BUILTIN_DIR / "tokenizer.json").read_bytes())
    (snap.parents[1] / "refs").mkdir()
    (snap.parents[1] / "refs" / "main").write_text("abc123")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    assert load_tokenizer("acme/coder-7b").identity.source == "acme/coder-7b"


def test_load_tokenizer_unknown_hub_id_raises_and_names_the_fix(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    with pytest.raises(TokenizerError, match="--tokenizer builtin") as info:
        load_tokenizer("meta-llama/Llama-3.3-70B-Instruct")
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    "content, match",
    [
        (b"{not json", "not valid JSON"),
        (b'{"model": {"type": "BPE", "vocab": {}}}', "no vocabulary"),
        (b"[1, 2]", "no vocabulary"),
    ],
)
def test_load_tokenizer_broken_file_raises_one_line(tmp_path, content, match):
    (tmp_path / "tokenizer.json").write_bytes(content)
    with pytest.raises(TokenizerError, match=match) as info:
        load_tokenizer(str(tmp_path / "tokenizer.json"))
    assert "\n" not in str(info.value)


def test_load_tokenizer_folder_without_tokenizer_json_raises(tmp_path):
    with pytest.raises(TokenizerError, match="no tokenizer.json"):
        load_tokenizer(str(tmp_path))


def _gpt2_style_tokenizer(path: Path) -> Path:
    """A small byte-level BPE with GPT-2's pre-tokenizer, whose splits around blank lines are not additive."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    corpus = ["def f(x):\n    return x\n\n", "class A:\n    pass\n\n", "x = 1\n"] * 50
    tok.train_from_iterator(
        corpus, trainers.BpeTrainer(vocab_size=400, initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    )
    tok.save(str(path))
    return path


def test_non_additive_tokenizer_is_detected_and_counts_stay_exact(tmp_path):
    tok = load_tokenizer(str(_gpt2_style_tokenizer(tmp_path / "tokenizer.json")))
    assert not tok.additive
    composer = Composer(tok, seed=3)
    rng = np.random.default_rng(0)
    for n in (5, 60, 700):
        text = composer.fill("code", n, rng)
        assert text.tokens == tok.count(text.text)


def test_export_loads_in_transformers_with_a_chat_template(builtin, tmp_path):
    transformers = pytest.importorskip("transformers")
    builtin.export(tmp_path / "tok")
    auto = transformers.AutoTokenizer.from_pretrained(str(tmp_path / "tok"))
    tools = [
        {
            "type": "function",
            "function": {
                "name": "read_file",
                "description": "Read",
                "parameters": {"type": "object", "properties": {}},
            },
        }
    ]
    messages = [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "hi"},
        {
            "role": "assistant",
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": '{"path": "a.py"}'}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "print(1)"},
    ]
    rendered = auto.apply_chat_template(messages, tools=tools, tokenize=False, add_generation_prompt=True)
    assert "read_file" in rendered and "print(1)" in rendered and rendered.endswith("<|im_start|>assistant\n")
    assert auto.encode("def f(x): pass", add_special_tokens=False) == builtin.encode("def f(x): pass")


# --- hub ids, against a stand-in hub on loopback (tests/hub_stub.py) -------------------------------------------------


def _tokenizer_files(indent: int | None = None) -> dict[str, bytes]:
    raw = (BUILTIN_DIR / "tokenizer.json").read_bytes()
    if indent is not None:  # the same tokenizer, other bytes: another commit of the same repo
        raw = json.dumps(json.loads(raw), indent=indent).encode()
    return {
        "tokenizer.json": raw,
        "tokenizer_config.json": (BUILTIN_DIR / "tokenizer_config.json").read_bytes(),
        "README.md": b"# not a tokenizer file\n",
        "model-00001-of-00030.safetensors": b"weights",
    }


@pytest.fixture
def hub(tmp_path, monkeypatch):
    from hub_stub import HubStub, StubRepo, commit_sha

    old, new = commit_sha("v1"), commit_sha("v2")
    repos = {
        "org/tok": StubRepo(
            revisions={old: _tokenizer_files(indent=1), new: _tokenizer_files()}, refs={"main": new, "v1": old}
        ),
        "org/gated": StubRepo(revisions={new: _tokenizer_files()}, refs={"main": new}, gated_token="hf_secret"),
        "org/spm": StubRepo(
            revisions={new: {"tokenizer.model": b"sentencepiece", "README.md": b"x"}}, refs={"main": new}
        ),
    }
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub-cache"))
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    with HubStub(repos) as stub:
        monkeypatch.setenv("HF_ENDPOINT", stub.endpoint)
        stub.old, stub.new = old, new
        yield stub


def test_hub_id_downloads_only_the_tokenizer_files_then_works_offline(hub, monkeypatch):
    tok = load_tokenizer("org/tok")

    assert tok.identity.source == "org/tok" and tok.identity.commit == hub.new
    assert tok.identity.to_dict()["commit"] == hub.new
    fetched = {path.rsplit("/", 1)[-1] for method, path in hub.requests if method == "GET" and "/resolve/" in path}
    assert fetched == {"tokenizer.json", "tokenizer_config.json"}  # no README, no weights
    served = len(hub.requests)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert load_tokenizer("org/tok").identity == tok.identity
    assert len(hub.requests) == served  # the cache, not the hub


@pytest.mark.parametrize("revision", ["v1", "old-sha"])
def test_hub_revision_pins_the_tokenizer_and_is_recorded(hub, revision):
    rev = hub.old if revision == "old-sha" else revision

    old = load_tokenizer("org/tok", rev)

    assert old.identity.commit == hub.old
    assert old.identity.sha256 != load_tokenizer("org/tok").identity.sha256


def test_hub_gated_repo_needs_hf_token(hub, monkeypatch):
    with pytest.raises(TokenizerError, match="is gated: accept its terms on the hub, then set HF_TOKEN"):
        load_tokenizer("org/gated")
    monkeypatch.setenv("HF_TOKEN", "hf_secret")
    assert load_tokenizer("org/gated").identity.commit == hub.new


@pytest.mark.parametrize(
    "name, revision, says",
    [
        ("org/nope", None, "no hub repo 'org/nope'"),
        ("org/tok", "v9", "hub repo 'org/tok' has no revision 'v9'"),
        ("org/spm", None, "hub repo 'org/spm' has no tokenizer.json (only tokenizer.model, a sentencepiece model)"),
    ],
)
def test_hub_errors_are_one_line_naming_the_fix(hub, name, revision, says):
    with pytest.raises(TokenizerError) as info:
        load_tokenizer(name, revision)
    assert says in str(info.value) and "\n" not in str(info.value)


def test_hub_offline_and_not_cached_says_so(hub, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(TokenizerError, match="not in the local Hugging Face cache .* HF_HUB_OFFLINE is set"):
        load_tokenizer("org/tok")
    assert hub.requests == []


def test_hub_tokenizer_through_the_command_records_repo_and_commit(hub, tmp_path):
    from conftest import SMALL, run_fastgen

    args = [a for a in SMALL if a not in ("--tokenizer", "builtin")]
    result = run_fastgen(
        *args,
        "--model",
        "org/tok",
        "--tokenizer-revision",
        "v1",
        "--workers",
        "1",
        "--output-dir",
        str(tmp_path / "traces"),
        "--config-dir",
        str(tmp_path / "configs"),
    )

    assert result.returncode == 0, result.stderr
    recorded = json.loads((tmp_path / "traces" / "manifest.json").read_bytes())
    assert recorded["tokenizer"]["source"] == "org/tok" and recorded["tokenizer"]["commit"] == hub.old
    assert recorded["arguments"]["tokenizer_revision"] == "v1"
    again = run_fastgen(
        "--quiet",
        "--from-manifest",
        str(tmp_path / "traces" / "manifest.json"),
        "--output-dir",
        str(tmp_path / "t2"),
        "--config-dir",
        str(tmp_path / "c2"),
    )
    assert again.returncode == 0, again.stderr
    assert (tmp_path / "t2" / "manifest.json").read_bytes() == (tmp_path / "traces" / "manifest.json").read_bytes()


def test_a_count_cut_at_special_tokens_is_the_count_encoded_whole():
    from tokenizers import AddedToken

    tokenizer = load_tokenizer("builtin")
    tokenizer._hf.add_special_tokens([AddedToken("<mask>", lstrip=True, rstrip=True)])  # absorbs the spaces around it
    memo: dict = {}
    texts = [
        "<|im_start|>system\nYou are x.<|im_end|>\n<|im_start|>user\nhi  <|im_end|>\n<|im_start|>assistant\n",
        "<|im_end|><|im_end|>",
        "plain text, no special token\n",
        "",
        "a <mask> b<|im_end|> <mask> c",
        "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n",
    ]
    for text in texts + texts:  # the second time from the memo
        assert tokenizer.encoded_count_cut(text, memo) == tokenizer.encoded_count(text), text
    assert memo, "the stretches between special tokens were remembered"
