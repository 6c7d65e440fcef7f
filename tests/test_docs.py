"""The docs show exactly the examples the end-to-end tests apply (tests/e2e/test_docs_examples.py)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from tests.conftest import REPO

DOCS = REPO / "docs"
EXAMPLES = sorted((DOCS / "examples").glob("*.yaml"))
BLOCK = re.compile(r"```yaml\n# (docs/examples/[\w.-]+\.yaml)\n(.*?)```", re.DOTALL)


def shown() -> dict[str, list[str]]:
    """Example path -> the text of every block in docs/*.md that says it shows that file."""
    found: dict[str, list[str]] = {}
    for page in sorted(DOCS.glob("*.md")):
        for match in BLOCK.finditer(page.read_text()):
            found.setdefault(match.group(1), []).append(match.group(2))
    return found


def test_every_example_is_shown_in_a_guide_and_every_shown_example_exists() -> None:
    names = {f"docs/examples/{p.name}" for p in EXAMPLES}
    assert names, "docs/examples holds the examples"
    assert set(shown()) == names


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: str(p.name))
def test_a_guide_shows_the_example_as_it_is(example: Path) -> None:
    text = example.read_text()
    for block in shown()[f"docs/examples/{example.name}"]:
        assert block == text


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: str(p.name))
def test_an_example_is_kubernetes_objects(example: Path) -> None:
    for doc in yaml.safe_load_all(example.read_text()):
        assert {"apiVersion", "kind", "metadata"} <= set(doc), doc
