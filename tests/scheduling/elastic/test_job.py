from __future__ import annotations

import pytest

from scheduling.elastic import MAX_ELASTIC_WORKERS, JobError, WorkerRange, check_job


@pytest.mark.parametrize(
    ("min_available", "max_workers", "why"),
    [
        pytest.param(
            5, "3", "min workers 4 (minAvailable 5 less the launcher) is above max workers 3", id="min>max"
        ),
        pytest.param(
            3, "many", "must be a whole number of at most 9 digits, got 'many'", id="max not a number"
        ),
        pytest.param(3, "-2", "must be a whole number of at most 9 digits, got '-2'", id="negative max"),
        pytest.param(
            3, "²", "must be a whole number of at most 9 digits, got '²'", id="a digit int() refuses"
        ),
        pytest.param(3, "9" * 5000, f"got '{'9' * 31}... (5002 characters)", id="5,000 digits"),
        pytest.param(3, "", "must be a whole number of at most 9 digits, got ''", id="empty"),
        pytest.param(3, "\uff11\uff12", "must be a whole number of at most 9 digits", id="full-width digits"),
        pytest.param(None, "4", "needs schedulingPolicy.minAvailable of at least 2", id="no minimum"),
        pytest.param(
            True, "4", "needs schedulingPolicy.minAvailable of at least 2", id="a bool is no number"
        ),
        pytest.param(
            20, "40", "minimum of 19 workers x 2 GPUs is more than the cluster's 32 GPUs", id="too big"
        ),
    ],
)
def test_a_bad_declaration_says_what_is_wrong_and_raises_nothing_else(
    min_available: object, max_workers: object, why: str
) -> None:
    with pytest.raises(JobError) as caught:
        check_job("ml/j", min_available, max_workers, 32, 2)
    assert why in str(caught.value)
    assert str(caught.value).startswith("MPIJob ml/j: ")


def test_a_good_declaration_gives_the_worker_range() -> None:
    assert check_job("ml/j", 3, " 6 ", 32, 2) == WorkerRange(2, 6)


def test_workers_that_ask_for_no_gpu_are_never_sized() -> None:
    with pytest.raises(JobError) as caught:
        check_job("ml/j", 3, "100000", 32, 0)
    assert str(caught.value) == (
        "MPIJob ml/j: its workers ask for no nvidia.com/gpu; phalanx grows elastic jobs into free GPUs "
        "only, so it does not size this job (it keeps the workers it declares)"
    )


@pytest.mark.parametrize(
    ("max_workers", "gpus", "worker_gpus", "expected"),
    [
        (
            "100000",
            32,
            2,
            WorkerRange(
                2,
                16,
                "MPIJob ml/j: max workers 100000 capped to 16: the cluster's 32 GPUs hold at "
                "most 16 workers of 2 GPUs",
            ),
        ),
        (
            "999999999",
            1_000_000,
            1,
            WorkerRange(
                2,
                MAX_ELASTIC_WORKERS,
                "MPIJob ml/j: max workers 999999999 capped to 1024: phalanx "
                "grows an elastic job to at most 1024 workers",
            ),
        ),
        ("16", 32, 2, WorkerRange(2, 16)),
    ],
)
def test_max_workers_is_capped_by_what_the_cluster_could_hold_and_by_the_limit_with_a_reason(
    max_workers: str, gpus: int, worker_gpus: int, expected: WorkerRange
) -> None:
    assert check_job("ml/j", 3, max_workers, gpus, worker_gpus) == expected
