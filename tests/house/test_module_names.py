"""No two modules under fastgen/ share a file name, so that a name in a traceback, a diff or a search names one room.

A name two modules may share is listed below with exactly the modules that share it and why a rename would read
worse (or waits on work elsewhere); a third module under a listed name, or a new pair, fails.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import fastgen

ROOT = Path(fastgen.__file__).parent

SHARED_NAMES: dict[str, set[str]] = {
    # every package has its door
    "__init__.py": {"*"},
    # a report section is named for the scenario it reports, as the scenario is
    "scenario1.py": {"generator/scenarios/scenario1.py", "results/sections/scenario1.py"},
    "scenario2.py": {"generator/scenarios/scenario2.py", "results/sections/scenario2.py"},
    "scenario3.py": {"generator/scenarios/scenario3.py", "results/sections/scenario3.py"},
    # what each package's members share, inside the package that holds them
    "common.py": {"generator/scenarios/common.py", "results/sections/common.py"},
    # a cli module is named for the command group it parses (`fastgen workload ...`)
    "workload.py": {"cli/workload.py", "generator/workload.py"},
    # the run folders, written and read: bakeoff/ and results/ runs.py are being rewritten around one run-folder
    # reader in formats/ (issue 46, item 1); renaming them now would collide with that work. cli/runs.py parses the
    # commands that make and compare runs.
    "runs.py": {"bakeoff/runs.py", "cli/runs.py", "results/runs.py"},
    # the two reports, each with its own plots, summary and statistics: `fastgen analyze` (predicted) and `fastgen
    # compare` (measured); the wing in the path says which
    "report.py": {"analysis/report.py", "results/report.py"},
    "plots.py": {"analysis/plots.py", "results/plots.py"},
    "summary.py": {"analysis/summary.py", "results/sections/summary.py"},
    "stats.py": {"results/stats.py", "traffic/stats.py"},
    # one format written and read: a replay exported as Mooncake lines, and Mooncake lines read as traffic (each
    # traffic/ reader is named for the format it reads)
    "mooncake.py": {"export/mooncake.py", "traffic/mooncake.py"},
    # the prompts check (were both sides sent the same prompts) and the report section that shows it
    "prompts.py": {"results/prompts.py", "results/sections/prompts.py"},
}


def shared_names(root: Path) -> dict[str, set[str]]:
    """Each file name two or more modules under root carry, with their paths relative to root."""
    paths: dict[str, set[str]] = defaultdict(set)
    for path in root.rglob("*.py"):
        paths[path.name].add(path.relative_to(root).as_posix())
    return {name: found for name, found in paths.items() if len(found) > 1}


def unlisted(shared: dict[str, set[str]], allowed: dict[str, set[str]]) -> list[str]:
    """A line for each shared name the allowlist does not cover, path for path."""
    found = []
    for name, paths in sorted(shared.items()):
        listed = allowed.get(name, set())
        if "*" not in listed and not paths <= listed:
            found.append(f"{name} also names {', '.join(sorted(paths - listed))}: rename it for what it holds")
    return found


def test_no_two_modules_share_a_file_name_outside_the_list():
    assert unlisted(shared_names(ROOT), SHARED_NAMES) == []


def test_every_listed_shared_name_is_still_shared():
    # a rename that ends a pair takes its entry with it: the list only shrinks
    shared = shared_names(ROOT)
    assert (
        sorted(name for name, paths in SHARED_NAMES.items() if shared.get(name, set()) != paths and "*" not in paths)
        == []
    )


def test_the_check_names_a_new_pair_and_a_third_module_under_a_listed_name(tmp_path):
    for relative in (
        "a/blocks.py",
        "b/blocks.py",
        "a/runs.py",
        "b/runs.py",
        "c/runs.py",
        "a/__init__.py",
        "b/__init__.py",
    ):
        (tmp_path / relative).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / relative).write_text("")
    allowed = {"__init__.py": {"*"}, "runs.py": {"a/runs.py", "b/runs.py"}}
    assert unlisted(shared_names(tmp_path), allowed) == [
        "blocks.py also names a/blocks.py, b/blocks.py: rename it for what it holds",
        "runs.py also names c/runs.py: rename it for what it holds",
    ]
