from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from scheduling.elastic import size_jobs
from tests.scheduling.elastic.builders import a_job


def test_a_job_alone_grows_to_its_maximum_and_no_further() -> None:
    job = a_job("solo", ["n1", "n1"], low=2, high=6)
    assert size_jobs([job], 24, {"q": 24}) == {"ml/solo": 6}


def test_a_waiting_gang_shrinks_the_pool_and_the_job_gives_back_its_surplus_first() -> None:
    job = a_job("solo", ["n1"] * 6, low=2, high=6)
    assert size_jobs([job], 24 - 16, {"q": 0}) == {"ml/solo": 4}


def test_the_queue_furthest_below_its_fair_share_gets_the_next_worker() -> None:
    a = a_job("a", ["n1"], queue="qa", low=1, high=8)
    b = a_job("b", ["n2"], queue="qb", low=1, high=8)
    sizes = size_jobs([a, b], 12, {"qa": 2, "qb": 8})
    assert sizes == {"ml/a": 2, "ml/b": 4}


def test_jobs_of_one_queue_grow_evenly_oldest_first() -> None:
    old, new = a_job("old", ["n1"], created="1"), a_job("new", ["n2"], created="2")
    assert size_jobs([old, new], 10, {"q": 10}) == {"ml/old": 3, "ml/new": 2}


jobs = st.lists(
    st.tuples(
        st.integers(1, 3), st.integers(0, 4), st.sampled_from([1, 2, 4]), st.sampled_from(["qa", "qb"])
    ),
    min_size=1,
    max_size=5,
)


@given(jobs, st.integers(0, 64), st.integers(-8, 16), st.integers(-8, 16))
def test_sizes_stay_within_min_max_and_the_pool(
    spec: list[tuple[int, int, int, str]], pool: int, deficit_a: int, deficit_b: int
) -> None:
    built = [
        a_job(f"j{i}", [], queue=q, low=low, high=low + extra, gpus=gpus)
        for i, (low, extra, gpus, q) in enumerate(spec)
    ]
    deficits = {"qa": deficit_a, "qb": deficit_b}
    sizes = size_jobs(built, pool, deficits)
    assert sizes == size_jobs(list(reversed(built)), pool, deficits), "order of the input changes nothing"
    for job in built:
        assert job.min_workers <= sizes[job.key] <= job.max_workers
    above = sum((sizes[j.key] - j.min_workers) * j.worker.gpus for j in built)
    floor = sum(j.min_workers * j.worker.gpus for j in built)
    assert above <= max(0, pool - floor)
    # Nothing is left that a job below its maximum could still take.
    left = pool - floor - above
    assert all(sizes[j.key] == j.max_workers or j.worker.gpus > left for j in built)
