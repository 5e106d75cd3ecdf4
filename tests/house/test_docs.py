"""The project's docs stand alone: a clone has no ../shared, so nothing may send a reader there."""

from __future__ import annotations

import re

import pytest

from _support import ROOT
from _support.figures import quoted, trace_and_dataset_bytes
from _support.docs import _fenced_commands, _words
from conftest import run_fastgen

DOCS = [
    ROOT / "README.md",
    *sorted((ROOT / "docs").glob("*.md")),
    ROOT / "e2e" / "README.md",
    ROOT / "native_bench" / "README.md",
]


def test_no_doc_refers_to_a_folder_outside_the_repository():
    assert [p.name for p in DOCS if "shared/docs" in p.read_text() or "../shared" in p.read_text()] == []


def test_readme_links_the_benchmark_description_and_every_relative_link_resolves():
    readme = (ROOT / "README.md").read_text()
    assert "(docs/benchmark.md)" in readme.split("\n\n", 2)[1]  # in the first paragraph
    for doc in DOCS:
        for target in re.findall(r"\]\(([^)#:]+)\)", doc.read_text()):
            assert (doc.parent / target).exists(), f"{doc.name} links {target}, which is not there"
    assert "## Scenario 3" in (ROOT / "docs" / "benchmark.md").read_text()


# The documentation site (mkdocs.yml, docs/): README.md is the front door, the pages hold the rest. These checks are
# cheap (no mkdocs import); `make docs` builds the site with --strict, which also fails on a broken link or anchor.

README_MOST_LINES = 260
COMMAND_DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def _nav_pages(entries) -> list[str]:
    """Every page a mkdocs nav names, nested sections included."""
    pages = []
    for entry in entries:
        value = next(iter(entry.values())) if isinstance(entry, dict) else entry
        pages += _nav_pages(value) if isinstance(value, list) else [value]
    return pages


def test_every_docs_page_is_in_the_nav_and_every_nav_entry_exists():
    import yaml

    site = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    docs = ROOT / site.get("docs_dir", "docs")
    nav = _nav_pages(site["nav"])
    assert len(nav) == len(set(nav)), f"a page is in mkdocs.yml's nav twice: {nav}"
    assert [page for page in nav if not (docs / page).is_file()] == []
    left_out = {name.lstrip("/") for name in str(site.get("not_in_nav", "")).split()}  # kept off it on purpose
    pages = {p.relative_to(docs).as_posix() for p in docs.rglob("*.md")}
    assert sorted(pages - set(nav) - left_out) == [], "add these pages to mkdocs.yml's nav (or to not_in_nav)"
    assert nav[0] == "index.md" and "benchmark.md" in nav


def test_readme_is_a_front_door():
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= README_MOST_LINES, f"README.md has {len(lines)} lines: move the detail into docs/"
    readme = "\n".join(lines)
    for page in ("docs/generate.md", "docs/bakeoff.md", "docs/report.md", "docs/cpu.md", "docs/reference.md"):
        assert f"({page})" in readme
    assert "make test" in readme  # CI's entry point runs the README's test command


def _fastgen_arguments(words: list[str]):
    """fastgen's arguments when the words run fastgen (`fastgen`, `.venv/bin/fastgen`, `python -m fastgen`)."""
    if words and words[0].endswith("fastgen") and "/" not in words[0].replace(".venv/bin/", ""):
        return words[1:]
    if len(words) > 2 and words[0].endswith("python") and words[1:3] == ["-m", "fastgen"]:
        return words[3:]
    return None


def _docs_commands():
    return [(doc.relative_to(ROOT).as_posix(), command) for doc in COMMAND_DOCS for command in _fenced_commands(doc)]


def test_every_fastgen_command_in_the_docs_parses(capsys):
    """Each `fastgen ...` line of README.md and docs/*.md, as a user types it, parses with the command's own parser
    (nothing runs); a synopsis line (`[--flag X]`, `...`) names only options its command has."""
    from fastgen.cli import _COMMANDS, _split

    seen, problems = 0, []
    for where, command in _docs_commands():
        arguments = _fastgen_arguments(_words(command))
        if arguments is None:
            continue
        seen += 1
        synopsis = any(w.startswith("[") or w.endswith("]") or w in ("...", "|") for w in arguments)
        if synopsis:  # `fastgen [generate] [--flag X] ...`, `fastgen verify DIR [--manifest FILE]`
            name = arguments[0].strip("[]")
            name = name if name in _COMMANDS else "generate"
        else:
            try:
                name, rest = _split(arguments)
            except Exception as exc:  # an unknown command
                problems.append(f"{where}: {command}: {exc}")
                continue
        parser = _COMMANDS[name][0]()
        if synopsis:
            known = {option for action in parser._actions for option in action.option_strings}
            unknown = sorted(set(re.findall(r"--[a-z][a-z0-9-]*", command)) - known)
            if unknown:
                problems.append(f"{where}: {command}: fastgen {name} has no {', '.join(unknown)}")
            continue
        try:
            parser.parse_args(rest)
        except SystemExit:
            problems.append(f"{where}: {command}: {capsys.readouterr().err.strip()}")
    assert problems == []
    assert seen >= 20  # the docs' commands were found


def test_every_engine_command_in_the_docs_parses(monkeypatch, capsys):
    """`python -m e2e.real.vllm ...` and `python -m e2e.real.sglang ...` in the docs parse with the module's own
    options; the install step they would start with is stopped before anything is done."""
    import importlib

    class Parsed(Exception):
        pass

    def parsed(*args, **kwargs):
        raise Parsed()

    seen, problems = 0, []
    for where, command in _docs_commands():
        words = _words(command)
        if len(words) < 3 or not words[0].endswith("python") or words[1] != "-m" or not words[2].startswith("e2e."):
            continue
        module = importlib.import_module(words[2])
        monkeypatch.setattr(module, "install", parsed)
        seen += 1
        try:
            module.main(words[3:])
            problems.append(f"{where}: {command}: ran past its install step")
        except Parsed:
            pass
        except SystemExit:
            problems.append(f"{where}: {command}: {capsys.readouterr().err.strip()}")
    assert problems == []
    assert seen >= 2


def test_every_make_target_in_the_docs_exists():
    makefile = (ROOT / "Makefile").read_text()
    targets = set(re.findall(r"^([a-z][a-z0-9-]*):", makefile, re.MULTILINE))
    named = {
        (where, words[1])
        for where, command in _docs_commands()
        if (words := _words(command))[:1] == ["make"] and len(words) > 1
    }
    for doc in COMMAND_DOCS:  # and `make X` in the prose
        named |= {(doc.name, target) for target in re.findall(r"`make ([a-z][a-z0-9-]*)", doc.read_text())}
    assert sorted((where, target) for where, target in named if target not in targets) == []
    assert "docs" in targets


def test_the_reference_names_every_option_of_every_command():
    """docs/reference.md has a row for every option `fastgen COMMAND --help` shows: a new option needs one."""
    from fastgen.cli import _COMMANDS

    reference = (ROOT / "docs" / "reference.md").read_text()
    missing = [
        f"fastgen {name} {option}"
        for name, (parser, _) in _COMMANDS.items()
        for action in parser()._actions
        for option in action.option_strings
        if option not in ("-h", "--help") and f"`{option}" not in reference and f", {option}" not in reference
    ]
    assert missing == [], "add these options to docs/reference.md: .venv/bin/python scripts/docs_reference.py"


def test_the_reference_script_rebuilds_the_tables_and_keeps_the_other_sections():
    """scripts/docs_reference.py rewrites only the command tables: the synopsis above them and the library section
    after them stay as written (it once dropped "As a library")."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("docs_reference", ROOT / "scripts" / "docs_reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    page = (ROOT / "docs" / "reference.md").read_text()
    rewritten = module.rewritten(page)
    assert rewritten.startswith(page[: page.index(module.FIRST)])
    assert rewritten.endswith(page[page.index(module.AFTER) :])
    assert "| `--shards N` |" in rewritten and rewritten.count("## `fastgen ") == len(module.COMMANDS)
    assert rewritten == page, (
        "docs/reference.md is behind the commands' --help: .venv/bin/python scripts/docs_reference.py"
    )


@pytest.mark.slow  # the field workload at full size, as the page's command writes it: about 18 s and 3.7 GB
def test_the_field_sizes_fidelity_quotes_are_what_its_command_writes(tmp_path):
    command = next(c for c in _fenced_commands(ROOT / "docs" / "fidelity.md") if "--workload field" in c)
    result = run_fastgen(*_fastgen_arguments(_words(command)), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    traces, datasets = trace_and_dataset_bytes(tmp_path / "field")
    pattern = r"([\d.]+) GB of trace files and ([\d.]+) GB of dataset file \(`field/agent_loop\.jsonl`[^)]*\), ([\d.]+) GB in all"
    written = tuple(f"{n / 1e9:.2f}" for n in (traces, datasets, traces + datasets))
    assert quoted("fidelity.md", pattern) == written


# The code's map (docs/architecture.md) is what the code's citations point at: a module it names that a split or a
# rename moved is a map that sends a new engineer to a room that is not there.
ARCHITECTURE = ROOT / "docs" / "architecture.md"


def test_every_module_and_folder_the_code_map_names_exists():
    text = ARCHITECTURE.read_text()
    named = set(re.findall(r"\bfastgen/[\w/]*\w\.py\b", text))
    assert len(named) > 40  # the pattern finds the paths (one it missed would be checked by nobody)
    assert sorted(p for p in named if not (ROOT / p).is_file()) == []
    # and the short forms in backticks: `analysis/routing.py` inside fastgen/, `e2e/real/`, `tests/house/test_sizes.py`
    short = set(re.findall(r"`((?:[\w.]+/)+(?:\w+\.py)?)`", text)) - named
    assert len(short) > 20
    assert sorted(p for p in short if not ((ROOT / p).exists() or (ROOT / "fastgen" / p).exists())) == []


def test_the_code_cites_the_map_and_no_design_file_the_repository_lacks():
    cited = [
        ROOT / "pyproject.toml",
        *sorted((ROOT / "fastgen").rglob("*.py")),
        *sorted((ROOT / "tests").rglob("*.py")),
    ]
    stale = [p.relative_to(ROOT).as_posix() for p in cited if re.search(r"\b(DESIGN|STYLE)\.md\b", p.read_text())]
    assert stale == [], "point these at docs/architecture.md (or a section of it)"
    assert "docs/architecture.md" in (ROOT / "pyproject.toml").read_text()
