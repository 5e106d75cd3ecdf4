"""The committed built-in tokenizer is exactly what scripts/train_tokenizer.py makes."""

from __future__ import annotations

import subprocess
import sys

import pytest

from _support import ROOT
from fastgen.formats.tokenizer import BUILTIN_DIR


# The corpus includes the running interpreter's standard library; the committed files were trained under 3.12.1.
@pytest.mark.skipif(
    sys.version_info[:3] != (3, 12, 1), reason="the committed tokenizer was trained under CPython 3.12.1"
)
def test_training_script_reproduces_the_committed_tokenizer(tmp_path):
    subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "train_tokenizer.py"), "--out", str(tmp_path)],
        check=True,
        capture_output=True,
        cwd=ROOT,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        timeout=300,
    )
    for name in ("tokenizer.json", "tokenizer_config.json"):
        assert (tmp_path / name).read_bytes() == (BUILTIN_DIR / name).read_bytes(), name
