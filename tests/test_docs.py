"""The project's docs stand alone: a clone has no ../shared, so nothing may send a reader there."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), ROOT / "e2e" / "README.md",
        ROOT / "native_bench" / "README.md"]


def test_no_doc_refers_to_a_folder_outside_the_repository():
    assert [p.name for p in DOCS if "shared/docs" in p.read_text() or "../shared" in p.read_text()] == []


def test_readme_links_the_benchmark_description_and_every_relative_link_resolves():
    readme = (ROOT / "README.md").read_text()
    assert "(docs/benchmark.md)" in readme.split("\n\n", 2)[1]  # in the first paragraph
    for doc in DOCS:
        for target in re.findall(r"\]\(([^)#:]+)\)", doc.read_text()):
            assert (doc.parent / target).exists(), f"{doc.name} links {target}, which is not there"
    assert "## Scenario 3" in (ROOT / "docs" / "benchmark.md").read_text()
