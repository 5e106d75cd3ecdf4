"""One small interface over a Hugging Face `tokenizers` tokenizer: resolve, count, encode, decode, export.

`--tokenizer` takes a tokenizer.json, a local model folder, a hub id (the local Hugging Face cache first, then a
download of only its tokenizer files, through huggingface_hub), or `builtin` (the byte-level BPE that ships with
fastgen). It never falls back silently: a tokenizer that cannot be found is an error that says how to point at one.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import xxhash

from ..errors import TokenizerError
from .pre_token_count import PreTokenCount

__all__ = ["Tokenizer", "load_tokenizer", "BUILTIN_DIR", "BUILTIN_NAME", "hub_cache_dir"]

BUILTIN_NAME = "builtin"
BUILTIN_DIR = Path(__file__).parents[1] / "data" / "builtin-tokenizer"
# Files a transformers tokenizer folder may need; exported beside the traces so configs can point at them offline.
# What the hub accepts as a repo id ("gpt2", "Qwen/Qwen3-32B"); anything else that is not on disk is a mistyped path.
_HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*(/[A-Za-z0-9][\w.-]*)?")
_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "chat_template.jinja")
# Joins the additivity probe checks: every unit boundary is a newline followed by one of these starts.
_PROBE_ENDS = ("x\n", "x\n\n", "x)\n", "x:\n", "x.\n\n", "x  \n", "x}\n", "x`\n", "x]\n", "9\n")
_PROBE_STARTS = (
    "def",
    "class",
    "_",
    "#",
    "-",
    "+",
    "@@",
    "1.",
    "`",
    "[",
    "(",
    "├",
    "└",
    "│",
    "E",
    "2026",
    ">",
    "*",
    "'",
    '"',
    "{",
    "|",
    "=",
    "/",
    "a",
    "Z",
    "é",
)
# Line numbers the numbered-lines probe puts before a tab: every digit count up to five, and the groupings the
# patterns treat differently (Llama 3 takes up to three digits a pre-token, Qwen one).
_PROBE_NUMBERS = ("1", "9", "10", "42", "99", "100", "999", "1000", "1234", "9999", "10000", "12345")


@dataclass(frozen=True)
class TokenizerIdentity:
    source: str  # "builtin", a path, or a hub id
    sha256: str  # of tokenizer.json's bytes
    vocab_size: int
    commit: str | None = None  # a hub id's resolved commit
    chat_template: dict | None = None  # {name, sha256} of a template given with --chat-template

    def to_dict(self) -> dict:
        doc = {"source": self.source, "sha256": self.sha256, "vocab_size": self.vocab_size}
        if self.commit is not None:
            doc["commit"] = self.commit
        return doc if self.chat_template is None else {**doc, "chat_template": self.chat_template}


class Tokenizer:
    """A loaded tokenizer. Counts exclude special tokens: they are the tokens of the text itself."""

    def __init__(self, hf, *, source: str, folder_files: dict[str, bytes], commit: str | None = None):
        self._hf = hf
        self.folder_files = folder_files
        self.identity = TokenizerIdentity(
            source,
            hashlib.sha256(folder_files["tokenizer.json"]).hexdigest(),
            hf.get_vocab_size(with_added_tokens=True),
            commit,
        )
        self.additive = self._probe_additive()
        self.numbers_split_at_tab = self._probe_numbers_split_at_tab()
        self._pre_tokens = PreTokenCount.of(hf, self.encoded_count)
        self._specials: tuple[re.Pattern[str] | None, set[str]] | None = (
            None  # (every added token, longest first; those that cut a text as they stand)
        )

    def encode(self, text: str) -> list[int]:
        return self._hf.encode(text, add_special_tokens=False).ids

    def encode_batch(self, texts: list[str]) -> list[list[int]]:
        """encode over many texts at once, on the tokenizers library's threads (a process that forks workers
        afterwards should use encode: see count)."""
        return [e.ids for e in self._encode_many(texts)]

    def _encode_many(self, texts: list[str]) -> list:
        # encode_batch_fast (tokenizers 0.20+) gives the same ids without computing character offsets, which neither
        # caller reads (about 13% faster on the content pools).
        fast = getattr(self._hf, "encode_batch_fast", None) or self._hf.encode_batch
        return fast(texts, add_special_tokens=False)

    def decode(self, ids: list[int]) -> str:
        return self._hf.decode(ids, skip_special_tokens=False)

    @property
    def counts_by_pre_tokens(self) -> bool:
        """Whether a text's count is the sum of its pre-tokens' (pre_token_count): a word after a space may then be
        swapped for another of the same count without counting again (content/variation.py)."""
        return self._pre_tokens is not None

    def count(self, text: str) -> int:
        """The tokens of `text`: by its pre-tokens where the tokenizer allows (pre_token_count), else encoded."""
        if self._pre_tokens is not None:
            tokens = self._pre_tokens.count(text)
            if tokens is not None:
                return tokens
        return self.encoded_count(text)

    def encoded_count(self, text: str) -> int:
        """The tokens of `text`, encoded whole: what proofs compare against."""
        # Not through a batch call: those start the tokenizers thread pool, and a parent that forks workers is better
        # off without threads.
        return len(self._hf.encode(text, add_special_tokens=False).ids)

    def encoded_count_cut(self, text: str, memo: dict) -> int:
        """encoded_count(text), with the text first cut at its special tokens, as the tokenizer itself cuts it: each
        text between them encoded alone and remembered in `memo`, each special token one token. Proof renderings
        repeat long stretches between the same special tokens (a tool catalog), so each is encoded once."""
        if self._specials is None:
            added = [t for t in self._hf.get_added_tokens_decoder().values() if t.content]
            self._specials = (
                re.compile(
                    "|".join(re.escape(t.content) for t in sorted(added, key=lambda t: len(t.content), reverse=True))
                )
                if added
                else None,
                {t.content for t in added if not (t.lstrip or t.rstrip or t.single_word or t.normalized)},
            )
        pattern, plain = self._specials
        if pattern is None:
            return self.encoded_count(text)
        total, at = 0, 0
        for match in pattern.finditer(text):  # the leftmost, longest added token, as the tokenizer matches them
            if match.group() in plain:
                total += self._remembered_count(text[at : match.start()], memo) + 1
                at = match.end()
        return total + self._remembered_count(text[at:], memo)

    def _remembered_count(self, text: str, memo: dict) -> int:
        if not text:
            return 0
        key = xxhash.xxh3_128_digest(text.encode())
        count = memo.get(key)
        if count is None:
            count = memo[key] = self.encoded_count(text)
        return count

    def __getstate__(self) -> dict:  # a pickled copy starts with no remembered pre-tokens
        return {**self.__dict__, "_pre_tokens": None, "_pickled_pre_tokens": self._pre_tokens is not None}

    def __setstate__(self, state: dict) -> None:
        rebuild = state.pop("_pickled_pre_tokens", False)
        self.__dict__.update(state)
        self._pre_tokens = PreTokenCount.of(self._hf, self.encoded_count) if rebuild else None

    def count_batch(self, texts: list[str]) -> list[int]:
        return [len(e.ids) for e in self._encode_many(texts)]

    def count_many(self, texts: list[str]) -> list[int]:
        """count over many texts: by their pre-tokens where the tokenizer allows (about three times faster than
        encoding on a content pool, whose words recur), the rest encoded in one batch call."""
        counts: list[int | None] = (
            [self._pre_tokens.count(t) for t in texts] if self._pre_tokens is not None else [None] * len(texts)
        )
        rest = [t for t, c in zip(texts, counts) if c is None]
        encoded = iter(self.count_batch(rest) if rest else [])
        return [next(encoded) if c is None else c for c in counts]

    def added_tokens(self) -> dict:
        """{id: AddedToken} of the tokenizer's added (special) tokens."""
        return dict(self._hf.get_added_tokens_decoder())

    def pre_tokens(self, text: str) -> list[tuple[int, int]]:
        """(start, end) character spans of the pre-tokenizer's pieces of `text` (one span without a pre-tokenizer)."""
        pre, normalizer = self._hf.pre_tokenizer, self._hf.normalizer
        # a normalizer that changes the text (Qwen's NFC on decomposed accents) moves offsets: no boundary is certain
        if pre is None or (normalizer is not None and normalizer.normalize_str(text) != text):
            return [(0, len(text))]
        return [span for _, span in pre.pre_tokenize_str(text)]

    def _probe_additive(self) -> bool:
        """Whether joining newline-terminated units never changes their token counts (see content/compose.py)."""
        return self._counts_add_up(_PROBE_ENDS, [start + " y\n" for start in _PROBE_STARTS])

    def _probe_numbers_split_at_tab(self) -> bool:
        """Whether a number before a tab is counted on its own: count(f"{n}\t{rest}") == count(str(n)) +
        count(f"\t{rest}"), so a numbered line's count is its number's plus its line's, whatever the number
        (content/budget.py counts a unit's lines once and its numbers apart)."""
        starts = _PROBE_STARTS + ("", " ", "    x", "\t", "\n", "\t\t", ")", ":", "9", ".5")
        return self._counts_add_up(_PROBE_NUMBERS, ["\t" + start + " y\n" for start in starts])

    def _counts_add_up(self, firsts: Sequence[str], seconds: Sequence[str]) -> bool:
        """Whether every first + second encodes to as many tokens as the two apart; each part encoded once."""
        # One text at a time (encoded_count), not count_batch: see count.
        first = {a: self.encoded_count(a) for a in firsts}
        second = {b: self.encoded_count(b) for b in seconds}
        return all(self.encoded_count(a + b) == first[a] + second[b] for a in firsts for b in seconds)

    @property
    def base_vocab_size(self) -> int:
        """The vocabulary without its added tokens: what tells one model family's tokenizer from another's."""
        return self._hf.get_vocab_size(with_added_tokens=False)

    @property
    def has_chat_template(self) -> bool:
        """Whether a server (and transformers) can render every chat prompt with this tokenizer folder: the template
        it picks for requests with tools and for those without (a named list needs "default", as transformers'
        apply_chat_template does; "tool_use" alone renders only the requests with tools)."""
        from .chat_template import template_source

        return all(template_source(self.folder_files, with_tools=tools) for tools in (False, True))

    def use_chat_template(self, source: str, *, name: str) -> None:
        """Count with `source` as the chat template (a tokenizer without one, or an override): it becomes the folder's
        chat_template.jinja, which servers (through transformers) and template_source pick before
        tokenizer_config.json's, so the exported folder renders with it too. The identity records its name and
        sha256."""
        from .chat_template import TEMPLATE_FILE

        data = source.encode("utf-8")
        self.folder_files[TEMPLATE_FILE] = data
        self.identity = dataclasses.replace(
            self.identity, chat_template={"name": name, "sha256": hashlib.sha256(data).hexdigest()}
        )

    def export(self, folder: Path) -> list[tuple[str, bytes]]:
        """Write a folder that transformers.AutoTokenizer loads (tokenizer.json plus its config files)."""
        folder.mkdir(parents=True, exist_ok=True)
        written = sorted(self.folder_files.items())
        for name, data in written:
            (folder / name).write_bytes(data)
        return written


def hub_cache_dir() -> Path:
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"])
    home = Path(os.environ.get("HF_HOME", Path.home() / ".cache" / "huggingface"))
    return home / "hub"


def _offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on")


def _download_hint(repo_id: str) -> str:
    return (
        f"download it where the hub is reachable (`huggingface-cli download {repo_id} tokenizer.json "
        f"tokenizer_config.json`), pass --tokenizer PATH (a tokenizer.json or a model folder), or use "
        f"--tokenizer builtin"
    )


def _from_hub(repo_id: str, revision: str | None) -> Path:
    """The snapshot folder of repo_id's tokenizer files: the local cache first, then a download of only those files.

    huggingface_hub does the work (cache layout, refs, revisions, HF_TOKEN, gated repos); the environment is read
    here on every call (HF_HUB_CACHE/HF_HOME, HF_ENDPOINT, HF_HUB_OFFLINE), not once at import.
    """
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import (
        GatedRepoError,
        LocalEntryNotFoundError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    kwargs: dict[str, Any] = dict(
        repo_id=repo_id,
        revision=revision,
        allow_patterns=list(_TOKENIZER_FILES) + ["tokenizer.model"],
        cache_dir=str(hub_cache_dir()),
        endpoint=os.environ.get("HF_ENDPOINT") or None,
        token=os.environ.get("HF_TOKEN") or None,
    )
    at = f" at revision {revision}" if revision else ""
    try:
        try:
            return Path(snapshot_download(**kwargs, local_files_only=True))
        except LocalEntryNotFoundError:
            if _offline():
                raise TokenizerError(
                    f"hub id '{repo_id}'{at} is not in the local Hugging Face cache "
                    f"({hub_cache_dir()}) and HF_HUB_OFFLINE is set; {_download_hint(repo_id)}"
                ) from None
            return Path(snapshot_download(**kwargs))
    except GatedRepoError:
        raise TokenizerError(
            f"hub repo '{repo_id}' is gated: accept its terms on the hub, then set HF_TOKEN to a token that may read it"
        ) from None
    except RepositoryNotFoundError:
        raise TokenizerError(
            f"no hub repo '{repo_id}' (or it is private: set HF_TOKEN), and no such path on disk; "
            f"check the id, or pass --tokenizer PATH or --tokenizer builtin"
        ) from None
    except RevisionNotFoundError:
        raise TokenizerError(
            f"hub repo '{repo_id}' has no revision {revision!r}; give a branch, tag or commit it "
            f"has (--tokenizer-revision)"
        ) from None
    except LocalEntryNotFoundError:  # the download failed: the hub could not be reached
        raise TokenizerError(
            f"hub id '{repo_id}'{at} is not in the local Hugging Face cache ({hub_cache_dir()}) "
            f"and the hub ({os.environ.get('HF_ENDPOINT') or 'huggingface.co'}) could not be "
            f"reached; {_download_hint(repo_id)}"
        ) from None


def _resolve_folder(name: str, revision: str | None = None) -> tuple[Path, Path, str | None]:
    """(folder, tokenizer.json, the hub commit or None) for a name; raises TokenizerError naming the fix."""
    if revision is not None and (name == BUILTIN_NAME or Path(name).expanduser().exists()):
        raise TokenizerError(f"--tokenizer-revision is for hub ids; {name} is not one")
    if name == BUILTIN_NAME:
        return BUILTIN_DIR, BUILTIN_DIR / "tokenizer.json", None
    path = Path(name).expanduser()
    if path.is_file():
        return path.parent, path, None
    if path.is_dir():
        if not (path / "tokenizer.json").is_file():
            raise TokenizerError(
                f"folder {name} has no tokenizer.json; point --tokenizer at a tokenizer.json, "
                f"a model folder that has one, or use --tokenizer builtin"
            )
        return path, path / "tokenizer.json", None
    if not _HUB_ID.fullmatch(name):
        raise TokenizerError(
            f"tokenizer path {name} does not exist; point --tokenizer at a tokenizer.json or a model "
            f"folder that has one, or use --tokenizer builtin"
        )
    snapshot = _from_hub(name, revision)
    if not (snapshot / "tokenizer.json").is_file():
        only = " (only tokenizer.model, a sentencepiece model)" if (snapshot / "tokenizer.model").is_file() else ""
        raise TokenizerError(
            f"hub repo '{name}' has no tokenizer.json{only}; convert it with transformers "
            f"(AutoTokenizer.from_pretrained('{name}').save_pretrained(DIR)) and pass --tokenizer DIR"
        )
    return snapshot, snapshot / "tokenizer.json", snapshot.name  # huggingface_hub names a snapshot by its commit


def load_tokenizer(name: str, revision: str | None = None) -> Tokenizer:
    """Load `builtin`, a tokenizer.json, a model folder, or a hub id (the local HF cache, else the hub; `revision`
    pins a branch, tag or commit)."""
    from tokenizers import Tokenizer as HFTokenizer

    folder, json_path, commit = _resolve_folder(name, revision)
    raw = json_path.read_bytes()
    try:
        parsed = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise TokenizerError(
            f"{json_path} is not valid JSON ({exc.__class__.__name__}); point --tokenizer at a real "
            f"tokenizer.json or use --tokenizer builtin"
        ) from exc
    if not isinstance(parsed, dict) or not isinstance(parsed.get("model"), dict) or not parsed["model"].get("vocab"):
        raise TokenizerError(
            f"{json_path} has no vocabulary (model.vocab); point --tokenizer at a complete "
            f"tokenizer.json or use --tokenizer builtin"
        )
    try:
        hf = HFTokenizer.from_str(raw.decode("utf-8"))
    except Exception as exc:  # tokenizers raises plain Exception subclasses for malformed files
        raise TokenizerError(
            f"{json_path} cannot be loaded by tokenizers ({str(exc).splitlines()[0][:120]}); "
            f"point --tokenizer at a valid tokenizer.json or use --tokenizer builtin"
        ) from exc
    files = {"tokenizer.json": raw}
    for extra in _TOKENIZER_FILES[1:]:
        if (folder / extra).is_file():
            files[extra] = (folder / extra).read_bytes()
    if "tokenizer_config.json" not in files:
        files["tokenizer_config.json"] = (
            json.dumps({"tokenizer_class": "PreTrainedTokenizerFast"}, indent=2).encode() + b"\n"
        )
    return Tokenizer(hf, source=name if name == BUILTIN_NAME else str(name), folder_files=files, commit=commit)
