"""Shared test configuration: paths to the repository and to the shared reference material."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"

settings.register_profile(
    "phalanx",
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    print_blob=True,
    derandomize=True,
)
settings.register_profile("explore", settings.get_profile("phalanx"), derandomize=False)
settings.load_profile("phalanx")
"""Every property test, whatever its own ``@settings``: no per-example deadline and no "too slow" health
check, both of which fail a correct test when the machine is busy (``hack/test`` must stay green on a
loaded machine; speed is the benchmarks' to report). A failure prints the blob that replays it
(``@reproduce_failure``). A test's own ``@settings`` still sets its number of examples.

Derandomized: each test draws the same examples on every run, so ``hack/test`` (and CI, which runs it)
passes or fails the same way twice on the same tree; a run that drew a new failing example at random
used to fail CI on a change that had nothing to do with it. Exploring new examples is a run of its own:
``pytest --hypothesis-profile=explore`` (random draws; add ``--hypothesis-seed=N`` to replay one), and a
failure it finds becomes an ``@example`` on the test."""


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    """The shared reference material (fixtures, topologies) that sits beside the checkout."""
    if not SHARED.is_dir():
        pytest.fail(f"{SHARED} is missing: the shared/ directory must sit beside the repository")
    return SHARED
