"""Every citation of a docs page's section (``docs/<page>.md, "Title"``) names a heading that exists.

The code's docstrings and the docs send a reader to the section where a figure or a choice
is measured; a renamed or removed heading breaks that trail silently.
"""
from __future__ import annotations

import functools
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SOURCES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md")), *sorted((REPO / "molsepnorm").rglob("*.py")),
           *sorted((REPO / "molsepnorm" / "models").glob("*.md")), *sorted((REPO / "scripts").rglob("*.py")),
           *sorted((REPO / "configs").rglob("*.yaml"))]
CITATION = re.compile(r"docs/([\w-]+)\.md(?:,\s+|\s+\()\"([^\"]+)\"")  # docs/x.md, "Title" or docs/x.md ("Title"


def flat(text: str) -> str:
    """The text with comment markers at line starts dropped and runs of whitespace as one space,
    so that a title wrapped over lines of a docstring or comment reads whole."""
    return " ".join(re.sub(r"(?m)^\s*#+\s?", " ", text).split())


def headings(page: Path) -> list[str]:
    """The page's markdown headings, whitespace collapsed (not the ``#`` comments of its code blocks)."""
    found, fenced = [], False
    for line in page.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif line.startswith("#") and not fenced:
            found.append(" ".join(line.lstrip("#").split()))
    return found


@functools.lru_cache(maxsize=1)
def citations() -> list[tuple[str, str, str]]:
    found = []
    for source in SOURCES:
        text = source.read_text(encoding="utf-8")
        # markdown headings would lose their '#': read them apart from the prose
        prose = flat(text) if source.suffix != ".md" else " ".join(text.split())
        for page, title in CITATION.findall(prose):
            found.append((str(source.relative_to(REPO)), page, title))
    return found


def test_the_citations_are_found():
    cited = citations()
    assert len(cited) > 50  # the pattern still matches how the project cites
    assert any(page == "accuracy" for _, page, _ in cited) and any(page == "pretraining" for _, page, _ in cited)


@pytest.mark.parametrize("source, page, title", citations())
def test_cited_section_exists(source: str, page: str, title: str):
    path = REPO / "docs" / f"{page}.md"
    assert path.is_file(), f"{source} cites docs/{page}.md, which does not exist"
    # a citation may shorten a heading to its start ("Held-out sets" for "Held-out sets: ChEMBL ...")
    assert any(heading.startswith(title) for heading in headings(path)), \
        f'{source} cites docs/{page}.md, "{title}": no heading starts so'
