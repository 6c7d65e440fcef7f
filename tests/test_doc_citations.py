"""Every design-note citation in the code names a file and a section that are in the repository.

Docstrings and comments explain a decision by citing a note and a section ("the design note on the
extender protocol, section 2.3", written as a path ending in ``.md`` and a section sign). A citation of a
note that lives elsewhere, or of a section that was renumbered away, sends a newcomer holding the
repository alone nowhere. A bare section sign cites the note named last before it in the same file.
In a guide or note, a section sign that does not continue a list of sections cites the page itself.
The guides' own links must also stay inside the repository.
"""

from __future__ import annotations

import io
import re
import tokenize
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import REPO

SKIP_DIRS = {".git", ".venv", "__pycache__", "node_modules", ".mypy_cache", ".ruff_cache"}
THIS = Path(__file__).resolve()
TOKEN = re.compile(r"(?P<path>[\w./-]*[\w-]\.md)\b|§\s?(?P<section>[0-9]+(?:\.[0-9A-Z]+)*)")
HEADING = re.compile(r"^#{1,6}\s+([0-9]+(?:\.[0-9A-Z]+)*)\.?\s", re.MULTILINE)
LIST = re.compile(r"[`\s,;]*(?:and|or)?[`\s,;]*")
LINK = re.compile(r"\]\((?!https?://|mailto:|#)([^)\s#]+)(?:#[^)]*)?\)")
TOP = {p.name for p in REPO.iterdir() if p.is_dir() and p.name not in SKIP_DIRS}


def _files(suffix: str) -> Iterator[Path]:
    for path in sorted(REPO.rglob(f"*{suffix}")):
        parts = set(path.relative_to(REPO).parts)
        if parts & SKIP_DIRS or any(p.endswith(".egg-info") for p in parts) or path.resolve() == THIS:
            continue
        yield path


def _guides() -> list[Path]:
    return [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]


def _resolve(name: str, citing: Path) -> Path | None:
    """The repository file a mention names, or ``None`` when it names a file of another project."""
    if "/" not in name:
        for place in (citing.parent, REPO):
            if (place / name).is_file():
                return place / name
        return REPO / name  # a bare name is always meant to be ours: missing, it is reported
    if name.split("/", 1)[0] in TOP:
        return REPO / name
    return None  # ``doc/PERFORMANCE.md`` of nccl-tests and the like: a source, not a link


def _prose(source: str) -> str:
    """``source`` with everything but its comments and docstrings blanked, lines kept in place.

    A docstring is a string standing as a statement of its own (a module's, a function's, or the
    attribute docstring under an assignment); a string inside code is data, not a citation.
    """
    lines = source.splitlines(keepends=True)
    kept = ["".join("\n" if c == "\n" else " " for c in line) for line in lines]
    chars = [list(line) for line in kept]
    previous = tokenize.NEWLINE
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        standing = token.type == tokenize.STRING and previous in (
            tokenize.NEWLINE,
            tokenize.INDENT,
            tokenize.DEDENT,
            tokenize.NL,
            tokenize.ENCODING,
        )
        if token.type == tokenize.COMMENT or standing:
            (row, col), (end_row, end_col) = token.start, token.end
            for r in range(row, end_row + 1):
                line = lines[r - 1]
                start = col if r == row else 0
                stop = end_col if r == end_row else len(line)
                chars[r - 1][start:stop] = list(line[start:stop])
        if token.type not in (tokenize.COMMENT, tokenize.NL):
            previous = token.type
    return "".join("".join(c) for c in chars)


def _sections(note: Path) -> set[str]:
    return set(HEADING.findall(note.read_text()))


def problems(citing: Path, text: str | None = None) -> list[str]:
    """What is wrong with the citations in one file (its ``text``, read when not given), one line each."""
    text = citing.read_text(errors="replace") if text is None else text
    if citing.suffix == ".py":
        text = _prose(text)
    found: list[str] = []
    last: Path | None = None
    end = 0
    where = citing.relative_to(REPO)
    for match in TOKEN.finditer(text):
        line = text.count("\n", 0, match.start()) + 1
        gap, end = text[end : match.start()], match.end()
        if citing.suffix == ".md" and not LIST.fullmatch(gap):
            last = citing  # in a note, a section sign on its own cites the note itself
        if match.group("path"):
            name = match.group("path")
            target = _resolve(name, citing)
            if target is None:
                continue
            if not target.is_file():
                found.append(f"{where}:{line}: {name} is not a file of this repository")
                last = None
                continue
            last = target
            continue
        section = match.group("section")
        if last is None:
            found.append(f"{where}:{line}: §{section} follows no note of this repository")
        elif section not in _sections(last):
            found.append(f"{where}:{line}: {last.relative_to(REPO)} has no section {section}")
    return found


CITING = [*_files(".py"), *_guides()]


@pytest.mark.parametrize("citing", CITING, ids=lambda p: str(p.relative_to(REPO)))
def test_citations_name_a_note_and_a_section_of_this_repository(citing: Path) -> None:
    assert problems(citing) == []


@pytest.mark.parametrize("guide", _guides(), ids=lambda p: str(p.relative_to(REPO)))
def test_guide_links_stay_inside_the_repository(guide: Path) -> None:
    outside = [
        target
        for target in LINK.findall(guide.read_text())
        if not (guide.parent / target).resolve().is_relative_to(REPO) or not (guide.parent / target).exists()
    ]
    assert outside == []


def test_a_citation_of_a_missing_note_or_section_is_reported() -> None:
    text = '"""See docs/architecture.md §99 and §1;\nshared-only.md §2, hack/perf/README.md."""\n'
    assert problems(REPO / "tests" / "probe.py", text) == [
        "tests/probe.py:1: docs/architecture.md has no section 99",
        "tests/probe.py:2: shared-only.md is not a file of this repository",
        "tests/probe.py:2: §2 follows no note of this repository",
    ]


def test_the_architecture_page_names_files_that_exist() -> None:
    """A newcomer goes from ``docs/architecture.md`` to any module: every path it names must be there.

    Inside the core's map and walks a path may be written from ``scheduling/`` (``gang/gang_planner.py``).
    """
    page = (REPO / "docs" / "architecture.md").read_text()
    named = set(re.findall(r"`((?:[a-z_]+/)+[\w.-]*)`", page))
    assert named, "the page names modules"
    missing = [p for p in named if not (REPO / p).exists() and not (REPO / "scheduling" / p).exists()]
    assert sorted(missing) == []
