"""The optional extras: one message for a missing one, whichever way its module is reached."""

from __future__ import annotations

import importlib.metadata
import sys

import pytest

from _support import ROOT
from fastgen.errors import FastgenError, MissingExtraError
from fastgen.extras import EXTRAS, import_extra, missing_extra, require_extra


def test_extras_are_the_ones_pyproject_declares():
    import tomllib

    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert set(EXTRAS) <= set(declared["project"]["optional-dependencies"])


@pytest.mark.parametrize(
    "extra, module, python",
    [
        ("validate", "inference_perf", " (Python 3.12)"),
        ("bakeoff", "inference_perf", " (Python 3.12)"),
        ("bakeoff", "prometheus_client", " (Python 3.12)"),
        ("plots", "matplotlib", ""),
    ],
)
def test_require_extra_missing_module_is_one_line_naming_command_extra_and_pip(monkeypatch, extra, module, python):
    monkeypatch.setitem(sys.modules, module, None)

    with pytest.raises(MissingExtraError) as caught:
        require_extra(extra, "fastgen x")

    assert str(caught.value) == f"fastgen x needs the {extra} extra: pip install 'fastgen[{extra}]'{python}"
    assert isinstance(caught.value, FastgenError)


def test_require_extra_wrong_inference_perf_version_says_which(monkeypatch):
    if missing_extra("validate", "x") is not None:
        pytest.skip("inference-perf is not installed here")
    monkeypatch.setattr(importlib.metadata, "version", lambda name: "0.9.1")

    assert missing_extra("validate", "fastgen validate") == (
        "fastgen validate needs the validate extra (inference-perf 0.7.x, not inference-perf 0.9.1): "
        "pip install 'fastgen[validate]' (Python 3.12)"
    )


def test_import_extra_missing_submodule_raises_the_same_message(monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib.pyplot", None)

    with pytest.raises(MissingExtraError, match=r"^drawing needs the plots extra: pip install 'fastgen\[plots\]'$"):
        import_extra("matplotlib.pyplot", extra="plots", command="drawing")
