from __future__ import annotations

import pytest

from scheduling.queues.workloads import NON_PREEMPTIBLE_PRIORITY, is_preemptible


@pytest.mark.parametrize(
    ("priority", "label", "preemptible"),
    [
        (NON_PREEMPTIBLE_PRIORITY - 1, None, True),
        (NON_PREEMPTIBLE_PRIORITY, None, False),
        (1000, " True ", True),
        (0, "FALSE", False),
        (0, "maybe", True),  # an unreadable label leaves the priority rule in force
    ],
)
def test_preemptible_by_priority_unless_labelled(priority: int, label: str | None, preemptible: bool) -> None:
    assert is_preemptible(priority, label) is preemptible
