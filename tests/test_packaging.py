"""The repository stands alone: docs cite no file outside it, and it is packaged completely."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), ROOT / "benchmarks" / "README.md"]
# Files of the project's private design notes, which are not part of the repository.
OUTSIDE = re.compile(r"\.\./shared|\bshared/|SPEC\.md|REFERENCES\.md|\bSPEC\b")
MARKDOWN_LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_docs_cite_nothing_outside_the_repository(doc):
    text = doc.read_text(encoding="utf-8")
    assert OUTSIDE.findall(text) == []
    for target in MARKDOWN_LINK.findall(text):
        if re.match(r"[a-z]+:", target):  # https:, mailto:
            continue
        resolved = (doc.parent / target).resolve()
        assert resolved.is_relative_to(ROOT) and resolved.exists(), f"{doc.name}: broken link {target}"


def test_code_and_scenarios_cite_nothing_outside_the_repository():
    files = [*ROOT.glob("mcsim/**/*.py"), *ROOT.glob("scenarios/*.toml"), *ROOT.glob("benchmarks/*.py")]
    assert files
    offenders = [str(f.relative_to(ROOT)) for f in files if OUTSIDE.search(f.read_text(encoding="utf-8"))]
    assert offenders == []
