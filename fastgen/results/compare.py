"""`fastgen compare`: two servers' runs in, report.md, report.json and PNG plots out.

Reading is tolerant (a missing or malformed file is named and the rest is compared), and nothing is left out
silently: a config only one side ran, or whose runs replayed different datasets, is named in the problems and not
compared. Writing is atomic per file and never over a file compare did not write (written.py).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

from ..errors import OutputError
from ..formats.atomic import write_atomically
from .ceilings import Ceilings, read_ceilings
from .plots import matplotlib_missing, write_plots
from .render import report_document, report_markdown
from .report import CompareOptions, Pair, Section, Side
from .runs import ConfigRun, read_runs
from .sections import SECTIONS
from .written import WrittenFiles

__all__ = ["CeilingsFor", "Comparison", "build_sections", "compare_runs"]

# A side's ceilings from its runs (fastgen.predicted runs analyze at what they recorded): (ceilings, or None and the
# one line that says why not)
CeilingsFor = Callable[[str, dict[str, ConfigRun]], tuple[Optional[Ceilings], Optional[str]]]


@dataclass
class Comparison:
    configs: list[str]
    sections: list[Section]
    problems: list[str] = field(default_factory=list)
    plots: dict[str, str] = field(default_factory=dict)
    plots_skipped: Optional[str] = None
    moved: list[str] = field(default_factory=list)  # the user's files --force moved aside


def build_sections(pair: Pair) -> list[Section]:
    """Every section, each B/A decided: a first build finds every test the report makes, Benjamini-Hochberg decides
    them together (inference.py), the second build shows each decided (the same figures, computed once)."""
    for module in SECTIONS:
        module.build(pair)
    pair.tests.decide()
    return [section for module in SECTIONS if (section := module.build(pair)) is not None]


def _short(hashes: list[str]) -> str:
    return ", ".join(h[:12] for h in hashes) or "not recorded"


def _other_datasets(a: dict[str, ConfigRun], b: dict[str, ConfigRun], labels: tuple[str, str]) -> tuple[set, list]:
    """(configs whose runs replayed more than one dataset, on either side or between them; the problems)."""
    problems, excluded = [], set()
    for label, runs in zip(labels, (a, b)):
        found = sorted({h for run in runs.values() for h in run.identity_values("dataset_sha256")})
        if len(found) > 1:
            problems.append(
                f"{label}'s runs replayed {len(found)} datasets ({_short(found)}); a config is compared "
                f"only where every run of it replayed the same one"
            )
    for name in sorted(set(a) & set(b)):
        ha, hb = a[name].identity_values("dataset_sha256"), b[name].identity_values("dataset_sha256")
        if len(set(ha) | set(hb)) > 1:
            excluded.add(name)
            problems.append(
                f"{name}: its runs replayed different datasets ({labels[0]}: {_short(ha)}; {labels[1]}: "
                f"{_short(hb)}); not compared: run both sides on one dataset"
            )
    return excluded, problems


def _ceilings(path: Optional[Path], option: str, problems: list[str]):
    if path is None:
        return None
    ceilings, more = read_ceilings(path)
    problems += [p.replace("--analysis ", f"{option} ", 1) for p in more]
    return ceilings


def _given(
    paths: tuple[Optional[Path], Optional[Path], Optional[Path]],
    sides: tuple[tuple[str, dict[str, ConfigRun]], ...],
    problems: list[str],
) -> list[Optional[Ceilings]]:
    """Each side's ceilings from the files given (--analysis for both, --analysis-a/-b for one), and a line for a
    side whose runs went through another fleet than the file's analysis is of (one cache beside a fleet's runs)."""
    shared = _ceilings(paths[0], "--analysis", problems)
    found = []
    for option, path, (label, runs) in zip(("--analysis-a", "--analysis-b"), paths[1:], sides):
        ceilings = _ceilings(path, option, problems) if path else shared
        ran, given = _ran_fleet(runs), "" if ceilings is None else ceilings.fleet()
        if ceilings is not None and ran is not None and ran != given:
            problems.append(
                f"{label}: its runs went through {ran or 'one engine'}, but {option if path else '--analysis'} is an "
                f"analysis of {given or 'one engine'}: its ceilings are not those of what ran (fastgen analyze "
                "--replicas N --router POLICY --kv-cache-tokens PER_REPLICA --json gives a fleet's)"
            )
        found.append(ceilings)
    return found


def _ran_fleet(runs: dict[str, ConfigRun]) -> Optional[str]:
    """The fleet the runs went through, as Ceilings.fleet() names one ("2 replicas behind round_robin"; "": one
    engine, or one replica behind a router); None where they went through several."""
    fleets = set()
    for run in runs.values():
        for repeat in run.repeats:
            router = repeat.identity.get("router")
            count = len(router.get("replica_urls") or []) if isinstance(router, dict) else 1
            fleets.add(f"{count} replicas behind {router.get('policy')}" if count > 1 else "")  # type: ignore[union-attr]
    return fleets.pop() if len(fleets) == 1 else None


def _predicted(
    ceilings_for: CeilingsFor, label: str, runs: dict[str, ConfigRun], problems: list[str]
) -> Optional[Ceilings]:
    ceilings, why = ceilings_for(label, runs)
    if why:
        problems.append(f"{label}: no ceilings: {why}")
    return ceilings


def compare_runs(
    runs_a: Path,
    runs_b: Path,
    out: Path,
    *,
    plots: bool = True,
    analysis: Optional[Path] = None,
    analysis_a: Optional[Path] = None,
    analysis_b: Optional[Path] = None,
    options: CompareOptions = CompareOptions(),
    force: bool = False,
    ceilings_for: Optional[CeilingsFor] = None,
) -> Comparison:
    """Read both sides' runs (and the ceilings of `fastgen analyze --json`: `analysis` for both sides, or one per
    side; for a side given none, `ceilings_for` its runs, e.g. fastgen.predicted.recorded_ceilings, which runs
    analyze at the capacity, block size and engine they recorded), write the report."""
    runs_a, runs_b, out = Path(runs_a), Path(runs_b), Path(out)
    if not 0 < options.plateau <= 1:
        raise OutputError(f"--plateau {options.plateau} is not a fraction of the peak; give one in (0, 1]")
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
    excluded, more = _other_datasets(a, b, (label_a, label_b))
    problems += more
    a = {n: r for n, r in a.items() if n not in excluded}
    b = {n: r for n, r in b.items() if n not in excluded}
    ceilings_a, ceilings_b = _given((analysis, analysis_a, analysis_b), ((label_a, a), (label_b, b)), problems)
    if ceilings_for is not None and analysis is None:
        if analysis_a is None:
            ceilings_a = _predicted(ceilings_for, label_a, a, problems)
        if analysis_b is None:
            ceilings_b = _predicted(ceilings_for, label_b, b, problems)
    pair = Pair(Side(label_a, a, ceilings_a), Side(label_b, b, ceilings_b), options)
    sections = build_sections(pair)
    problems += [p for s in sections for p in s.problems]
    comparison = Comparison(sorted(set(a) & set(b)), sections, problems)
    _write_report(pair, comparison, out, plots=plots, force=force)
    return comparison


def _write_report(pair: Pair, comparison: Comparison, out: Path, *, plots: bool, force: bool) -> None:
    """report.json, report.md and the plots into out, nothing of an earlier report left beside them."""
    try:
        out.mkdir(parents=True, exist_ok=True)
        written = WrittenFiles(out)
        drawn = [p for s in comparison.sections for p in s.plots if p.drawn]
        comparison.plots_skipped = "--no-plots" if not plots else matplotlib_missing("fastgen compare")
        names = ["report.json", "report.md"] + (
            [f"{p.name}.png" for p in drawn] if comparison.plots_skipped is None else []
        )
        comparison.moved = written.clear(names, force=force)
        if comparison.plots_skipped is None:
            comparison.plots = write_plots(drawn, out)
            for name in comparison.plots.values():
                written.wrote(name)
        document = report_document(pair, comparison.sections, comparison.problems, comparison.plots)
        _write(out / "report.json", json.dumps(document, indent=1, sort_keys=False) + "\n")
        written.wrote("report.json")
        _write(
            out / "report.md",
            report_markdown(pair, comparison.sections, comparison.problems, comparison.plots, comparison.plots_skipped),
        )
        written.wrote("report.md")
    except OSError as exc:
        raise OutputError(
            f"cannot write the report into {out}: {exc.strerror or exc}; choose a writable --out"
        ) from None


def _write(path: Path, text: str) -> None:
    write_atomically(path, text)
