"""fastgen: token-exact, graph-exact, reproducible KV-cache benchmark traces for inference-perf.

This module is the one door: everything a program needs is imported from here; the modules behind it are the
pipeline's stages (spec -> tokenizer -> content -> blocks -> plans -> spans -> files -> manifest).
"""

__version__ = "0.2.0"

from .errors import FastgenError, OutputError, SpecError, TokenizerError, ValidationError  # noqa: E402
from .output import RunOptions, generate  # noqa: E402
from .spec import Spec  # noqa: E402
from .tokenizer import Tokenizer, load_tokenizer  # noqa: E402
from .validate import check_file, validate_tree  # noqa: E402
from .verify import unpack_tree, verify_tree  # noqa: E402

__all__ = [
    "FastgenError",
    "OutputError",
    "RunOptions",
    "Spec",
    "SpecError",
    "Tokenizer",
    "TokenizerError",
    "ValidationError",
    "__version__",
    "check_file",
    "generate",
    "load_tokenizer",
    "unpack_tree",
    "validate_tree",
    "verify_tree",
]
