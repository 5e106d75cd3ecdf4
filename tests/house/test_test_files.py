"""Every command-line and traffic module has a test file named for it, in the folder its wing's tests live in:
fastgen/cli/<module>.py is tested in tests/cli/test_cli_<module>.py, fastgen/traffic/<module>.py in
tests/traffic/test_traffic_<module>.py (docs/architecture.md, Tests). A new module without one fails here."""

from __future__ import annotations

from pathlib import Path

from _support import ROOT

# the wings whose every module must have its own test file, and where those files live
NAMED_WINGS = ("cli", "traffic")


def untested(root: Path, wings: tuple[str, ...] = NAMED_WINGS) -> list[str]:
    """A line for each module of the wings (their package doors aside) with no test file named for it."""
    missing = []
    for wing in wings:
        for module in sorted((root / "fastgen" / wing).glob("*.py")):
            if module.name == "__init__.py":
                continue
            expected = root / "tests" / wing / f"test_{wing}_{module.name}"
            if not expected.is_file():
                missing.append(f"fastgen/{wing}/{module.name} has no {expected.relative_to(root).as_posix()}")
    return missing


def test_every_cli_and_traffic_module_has_a_test_file_named_for_it():
    assert untested(ROOT) == []


def test_the_check_names_a_module_without_a_test_file(tmp_path):
    for relative in (
        "fastgen/cli/__init__.py",
        "fastgen/cli/export.py",
        "fastgen/cli/runs.py",
        "tests/cli/test_cli_runs.py",
    ):
        (tmp_path / relative).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / relative).write_text("")
    assert untested(tmp_path, ("cli",)) == ["fastgen/cli/export.py has no tests/cli/test_cli_export.py"]


def test_each_named_test_file_holds_tests():
    # a file named for its module but empty would satisfy the name and test nothing
    for wing in NAMED_WINGS:
        for path in sorted((ROOT / "tests" / wing).glob(f"test_{wing}_*.py")):
            assert "\ndef test_" in path.read_text(), f"{path.relative_to(ROOT)} holds no test"
