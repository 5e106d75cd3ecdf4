"""Rewrite the option tables of docs/reference.md from the commands' own parsers (what `fastgen COMMAND --help` prints).

    .venv/bin/python scripts/docs_reference.py          # after adding or changing an option

Everything above the first command's heading (the synopsis, the make targets) and from the first section after the
tables (`## As a library`) on is kept as written; each command's table is rebuilt from its argparse actions, the help text expanded as --help expands it. tests/house/test_docs.py checks
that the page names every option.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from fastgen.cli import _COMMANDS

REFERENCE = Path(__file__).resolve().parents[1] / "docs" / "reference.md"
FIRST = "## `fastgen [generate]`"
AFTER = "## As a library"  # the first section after the tables, kept as written
# (heading, command, the page that says more, its title)
COMMANDS = [
    ("fastgen [generate]", "generate", "generate.md", "Generate a dataset"),
    ("fastgen workload show", "workload", "workload.md", "Your own workload"),
    ("fastgen validate", "validate", "generate.md", "Generate a dataset"),
    ("fastgen verify", "verify", "reproducibility.md", "Reproducibility"),
    ("fastgen unpack", "unpack", "generate.md", "Generate a dataset"),
    ("fastgen analyze", "analyze", "analyze.md", "Before you run: analyze"),
    ("fastgen export", "export", "analyze.md", "Before you run: analyze"),
    ("fastgen bakeoff", "bakeoff", "bakeoff.md", "Run the bakeoff"),
    ("fastgen compare", "compare", "report.md", "Read the report"),
]


def _flag(action: argparse.Action) -> str:
    if not action.option_strings:
        return "{" + ",".join(action.choices) + "}" if action.choices else (action.metavar or action.dest.upper())
    flag = ", ".join(action.option_strings)
    if action.nargs == 0:
        return flag
    value = action.metavar or ("{" + ",".join(action.choices) + "}" if action.choices else action.dest.upper())
    return f"{flag} {value}" + (" ..." if action.nargs in ("+", "*") else "")


def tables() -> str:
    out = []
    for heading, name, page, title in COMMANDS:
        parser = _COMMANDS[name][0]()
        formatter = parser._get_formatter()
        out += [
            f"## `{heading}`",
            "",
            " ".join(parser.description.split()) + f" More: [{title}]({page}).",
            "",
            "| option | what it does |",
            "|---|---|",
        ]
        for action in parser._actions:
            if isinstance(action, argparse._HelpAction):
                continue
            text = " ".join(formatter._expand_help(action).split()) if action.help else ""
            if name == "generate" and action.dest == "workers":  # the default is this machine's core count
                text = text.replace(f"(default: {action.default})", "(default: all cores)")
            out.append(f"| `{_flag(action)}` | {text.replace('|', chr(92) + '|')} |")
        if parser.epilog:
            out += ["", " ".join(parser.epilog.split())]
        out.append("")
    return "\n".join(out).rstrip() + "\n"


def rewritten(text: str) -> str:
    """The page with its command tables rebuilt and every other section as it was."""
    tail = text[text.index(AFTER) :] if AFTER in text else ""
    return text[: text.index(FIRST)] + tables() + ("\n" + tail if tail else "")


def main() -> None:
    REFERENCE.write_text(rewritten(REFERENCE.read_text()))


if __name__ == "__main__":
    main()
