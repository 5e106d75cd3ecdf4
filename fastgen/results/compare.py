"""`fastgen compare`: two servers' runs in, report.md, report.json and PNG plots out.

Reading is tolerant (a missing or malformed file is named and the rest is compared); writing is atomic per file.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from ..errors import OutputError
from .plots import matplotlib_missing, write_plots
from .render import report_document, report_markdown
from .ceilings import read_ceilings
from .report import Pair, Section, Side
from .runs import read_runs
from .sections import SECTIONS

__all__ = ["Comparison", "build_sections", "compare_runs"]


@dataclass
class Comparison:
    configs: list[str]
    sections: list[Section]
    problems: list[str] = field(default_factory=list)
    plots: dict[str, str] = field(default_factory=dict)
    plots_skipped: Optional[str] = None


def build_sections(pair: Pair) -> list[Section]:
    return [section for module in SECTIONS if (section := module.build(pair)) is not None]


def compare_runs(runs_a: Path, runs_b: Path, out: Path, *, plots: bool = True,
                 analysis: Optional[Path] = None) -> Comparison:
    """Read both sides' runs (and the ceilings of `fastgen analyze --json` when given), write the report."""
    runs_a, runs_b, out = Path(runs_a), Path(runs_b), Path(out)
    a, problems_a = read_runs(runs_a)
    b, problems_b = read_runs(runs_b)
    problems = problems_a + problems_b
    if not a or not b:
        raise OutputError("; ".join(problems) or "no runs to compare")
    label_a, label_b = runs_a.resolve().name, runs_b.resolve().name
    if label_a == label_b:
        label_a, label_b = f"A:{label_a}", f"B:{label_b}"
    for name in sorted(set(a) ^ set(b)):
        problems.append(f"{name} ran only on {label_a if name in a else label_b}; not compared")
    ceilings = None
    if analysis is not None:
        ceilings, more = read_ceilings(analysis)
        problems += more
    pair = Pair(Side(label_a, a), Side(label_b, b), ceilings)
    sections = build_sections(pair)
    comparison = Comparison(sorted(set(a) & set(b)), sections, problems)
    try:
        out.mkdir(parents=True, exist_ok=True)
        if plots:
            comparison.plots_skipped = matplotlib_missing()
            if comparison.plots_skipped is None:
                comparison.plots = write_plots([p for s in sections for p in s.plots], out)
        else:
            comparison.plots_skipped = "--no-plots"
        document = report_document(pair, sections, problems, comparison.plots)
        _write(out / "report.json", json.dumps(document, indent=1, sort_keys=False) + "\n")
        _write(out / "report.md", report_markdown(pair, sections, problems, comparison.plots,
                                                  comparison.plots_skipped))
    except OSError as exc:
        raise OutputError(f"cannot write the report into {out}: {exc.strerror or exc}; choose a writable --out") \
            from None
    return comparison


def _write(path: Path, text: str) -> None:
    temp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        temp.write_text(text, encoding="utf-8")
        os.replace(temp, path)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
