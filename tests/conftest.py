"""Shared test configuration: paths to the repository and to the shared reference material."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    """The shared reference material (fixtures, topologies) that sits beside the checkout."""
    if not SHARED.is_dir():
        pytest.fail(f"{SHARED} is missing: the shared/ directory must sit beside the repository")
    return SHARED
