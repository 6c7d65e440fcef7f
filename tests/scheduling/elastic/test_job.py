from __future__ import annotations

import pytest

from scheduling.elastic import JobError, check_job


@pytest.mark.parametrize(
    ("min_available", "max_workers", "why"),
    [
        pytest.param(
            5, "3", "min workers 4 (minAvailable 5 less the launcher) is above max workers 3", id="min>max"
        ),
        pytest.param(3, "many", "must be a whole number, got 'many'", id="max not a number"),
        pytest.param(3, "-2", "must be a whole number, got '-2'", id="negative max"),
        pytest.param(None, "4", "needs schedulingPolicy.minAvailable of at least 2", id="no minimum"),
        pytest.param(
            True, "4", "needs schedulingPolicy.minAvailable of at least 2", id="a bool is no number"
        ),
        pytest.param(
            20, "40", "minimum of 19 workers x 2 GPUs is more than the cluster's 32 GPUs", id="too big"
        ),
    ],
)
def test_a_bad_declaration_says_what_is_wrong(min_available: object, max_workers: object, why: str) -> None:
    with pytest.raises(JobError) as caught:
        check_job("ml/j", min_available, max_workers, 32, 2)
    assert why in str(caught.value)
    assert str(caught.value).startswith("MPIJob ml/j: ")


def test_a_good_declaration_gives_the_worker_range() -> None:
    assert check_job("ml/j", 3, " 6 ", 32, 2) == (2, 6)
