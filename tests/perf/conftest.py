"""Fixtures for the benchmark harness's offline parts: two runs' JSON, as ``hack/bench --json`` writes it.

``quick-old.json`` is a ``--quick`` run (100 and 1,000 nodes, fair share, no profile); ``full-new.json``
a full run (up to 5,000 nodes, the 150,000-pod envelope, profile and elastic, no fair share, one paced
p99 that was NaN and so written as null). The figures are made up so each goal's verdict is known.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.conftest import REPO

sys.path.insert(0, str(REPO / "hack"))

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture
def old_path() -> Path:
    return FIXTURES / "quick-old.json"


@pytest.fixture
def new_path() -> Path:
    return FIXTURES / "full-new.json"


@pytest.fixture
def new_run(new_path: Path) -> dict[str, Any]:
    run = orjson.loads(new_path.read_bytes())
    assert isinstance(run, dict)
    return run
