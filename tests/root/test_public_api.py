import collections
import collections.abc
import inspect
import typing

import fastgen

from _support import ROOT


def test_public_surface_is_the_sorted_all_and_nothing_is_missing():
    assert fastgen.__all__ == sorted(fastgen.__all__)
    for name in fastgen.__all__:
        assert getattr(fastgen, name) is not None, name


def _fastgen_classes(annotation) -> set[type]:
    """The fastgen classes an annotation names directly or through Optional/Union/list (not a Callable's)."""
    if isinstance(annotation, type):
        return {annotation} if annotation.__module__.startswith("fastgen") else set()
    if typing.get_origin(annotation) is collections.abc.Callable:  # what fastgen calls, not what a caller builds
        return set()
    return {c for arg in typing.get_args(annotation) for c in _fastgen_classes(arg)}


# public functions a caller hands to fastgen (compare_runs(ceilings_for=...)) rather than calls
CALLBACKS = {"recorded_ceilings"}


def test_every_class_a_public_function_takes_is_public_too():
    """A caller must be able to build, or be given by a public function, every argument of the public functions
    from `fastgen` alone: an options class left out of __init__ fails here, not in a user's import."""
    exported = {name: getattr(fastgen, name) for name in fastgen.__all__ if name != "__version__"}
    functions = {name: value for name, value in exported.items() if inspect.isfunction(value)}
    obtainable = set(exported.values())
    for value in functions.values():
        obtainable |= _fastgen_classes(typing.get_type_hints(value).get("return"))
    missing = set()
    for name, value in functions.items():
        if name in CALLBACKS:
            continue
        hints = typing.get_type_hints(value)
        hints.pop("return", None)
        for annotation in hints.values():
            missing |= {f"{name}: {c.__module__}.{c.__name__}" for c in _fastgen_classes(annotation) - obtainable}
    assert sorted(missing) == []


def test_each_command_has_its_library_function():
    """The library does what the commands do: each of these commands' work is one public call."""
    for name in ("generate", "validate_tree", "verify_tree", "analyze", "run_bakeoff", "compare_runs"):
        assert inspect.isfunction(getattr(fastgen, name)), name


def test_each_public_function_name_is_defined_once_in_fastgen():
    """One name, one function: a module behind the door that defines a function under a public name (as
    fastgen.bakeoff.run_bakeoff once did beside fastgen.run_bakeoff) is a second function a reader confuses with it."""
    import ast
    from pathlib import Path

    root = Path(fastgen.__file__).parent
    public = {name for name in fastgen.__all__ if inspect.isfunction(getattr(fastgen, name))}
    defined = collections.defaultdict(list)
    for path in sorted(root.rglob("*.py")):
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name in public:
                defined[node.name].append(path.relative_to(root).as_posix())
    assert {name: paths for name, paths in defined.items() if len(paths) > 1} == {}
    assert sorted(defined) == sorted(public)  # the check sees every public function where it is defined


def test_importing_fastgen_does_not_import_inference_perf():
    import subprocess
    import sys

    code = "import sys, fastgen; print('inference_perf' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout.strip() == "False"


def test_the_reference_pages_library_example_runs_as_written(tmp_path, monkeypatch, capsys):
    """docs/reference.md's "As a library" example, run as a user pastes it, in an empty folder."""

    page = (ROOT / "docs" / "reference.md").read_text()
    section = page.split("## As a library", 1)[1]
    code = section.split("```python\n", 1)[1].split("```", 1)[0]
    monkeypatch.chdir(tmp_path)
    exec(compile(code, "reference.md", "exec"), {})
    lines = capsys.readouterr().out.splitlines()
    assert lines and all(" % cached, unbounded" in line for line in lines)
    assert (tmp_path / "traces" / "manifest.json").is_file() and (tmp_path / "configs" / "manifest.json").is_file()
