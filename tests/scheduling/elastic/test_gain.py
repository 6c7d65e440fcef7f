from __future__ import annotations

from dataclasses import replace

from hypothesis import given
from hypothesis import strategies as st

from scheduling.elastic import ElasticJob, ElasticSettings
from scheduling.elastic.gain import nodes_for, size_by_gain
from scheduling.elastic.throughput import Sample, Throughput, fit
from tests.scheduling.elastic.builders import a_job

LINEAR = fit([Sample(1, 1, 10.0), Sample(4, 1, 40.0)])
FLAT = fit([Sample(1, 1, 10.0), Sample(4, 1, 12.0)])
SETTINGS = ElasticSettings()


def sizes(
    jobs: list[ElasticJob],
    pool: int,
    models: dict[str, Throughput] | None = None,
    *,
    deficits: dict[str, int] | None = None,
    attained: dict[str, float] | None = None,
    settings: ElasticSettings = SETTINGS,
) -> dict[str, int]:
    return size_by_gain(
        jobs,
        pool,
        deficits or {"q": 0},
        models=models or {},
        attained=attained or {},
        settings=settings,
        node_gpus=8,
    )


def test_the_job_that_scales_gets_the_workers_the_one_that_does_not_would_waste() -> None:
    fast, slow = a_job("fast", [], low=1, high=8, gpus=1), a_job("slow", [], low=1, high=8, gpus=1)
    got = sizes([fast, slow], 8, {"ml/fast": LINEAR, "ml/slow": FLAT})
    assert got["ml/fast"] > got["ml/slow"]
    assert got == {"ml/fast": 6, "ml/slow": 2}


def test_the_even_rule_assigns_them_alike() -> None:
    fast, slow = a_job("fast", [], low=1, high=8, gpus=1), a_job("slow", [], low=1, high=8, gpus=1)
    got = sizes([fast, slow], 8, settings=replace(SETTINGS, sizing="even"))
    assert got == {"ml/fast": 4, "ml/slow": 4}


def test_with_nothing_learned_jobs_grow_evenly() -> None:
    a, b = a_job("a", [], low=1, high=8, gpus=1), a_job("b", [], low=1, high=8, gpus=1)
    assert sizes([a, b], 8) == {"ml/a": 4, "ml/b": 4}


def test_a_queue_below_its_fair_share_comes_first_whatever_the_models_say() -> None:
    fast = a_job("fast", [], queue="qa", low=1, high=8, gpus=1)
    slow = a_job("slow", [], queue="qb", low=1, high=8, gpus=1)
    got = sizes([fast, slow], 6, {"ml/fast": LINEAR, "ml/slow": FLAT}, deficits={"qa": 0, "qb": 6})
    assert got == {"ml/fast": 1, "ml/slow": 5}


def test_a_growth_that_does_not_repay_its_restart_leaves_the_gpus_to_a_job_it_does_repay() -> None:
    running = a_job("big", ["n1"] * 8, low=1, high=9, gpus=1)
    modest = fit([Sample(1, 1, 10.0), Sample(8, 1, 40.0)])  # a ninth worker adds 4%: 24 s in 600 s < 30 s
    starting = a_job("new", [None], low=1, high=2, gpus=1)  # not running yet: growing costs no restart
    barely = fit([Sample(1, 1, 10.0), Sample(2, 1, 10.1)])  # a second worker adds 1%: outbid by the ninth
    models = {"ml/big": modest, "ml/new": barely}
    assert sizes([running, starting], 10, models) == {"ml/big": 8, "ml/new": 2}
    patient = replace(SETTINGS, gain_horizon_seconds=100_000.0)
    assert sizes([running, starting], 10, models, settings=patient) == {"ml/big": 9, "ml/new": 1}


def test_a_job_is_never_kept_small_beside_gpus_no_other_job_takes() -> None:
    """Idle GPUs cost nothing: the restart rule chooses between jobs, it never leaves GPUs unused."""
    running = a_job("big", ["n1"] * 8, low=1, high=9, gpus=1)
    modest = fit([Sample(1, 1, 10.0), Sample(8, 1, 40.0)])  # a ninth worker adds 4%: not repaid
    assert sizes([running], 9, {"ml/big": modest}) == {"ml/big": 9}
    flat = a_job("flat", ["n1"] * 4, low=1, high=6, gpus=2)
    assert sizes([flat], 12, {"ml/flat": FLAT}) == {"ml/flat": 6}


def test_a_job_holding_a_worker_keeps_it_against_an_equal_claim() -> None:
    holder = a_job("holder", ["n1"] * 3, low=1, high=8, gpus=1, created="2")
    older = a_job("older", ["n2"] * 2, low=1, high=8, gpus=1, created="1")
    assert sizes([holder, older], 5) == {"ml/holder": 3, "ml/older": 2}, "no trade: two restarts for nothing"
    free_trades = replace(SETTINGS, hysteresis=0.0, restart_seconds=0.0)
    assert sizes([holder, older], 5, settings=free_trades) == {"ml/holder": 2, "ml/older": 3}
    no_hysteresis = replace(SETTINGS, hysteresis=0.0)
    assert sizes([holder, older], 5, settings=no_hysteresis) == {"ml/holder": 3, "ml/older": 2}, (
        "the two restarts alone outweigh a gain of 1/2 - 1/3"
    )


def test_a_worker_is_traded_only_for_a_gain_that_repays_both_restarts() -> None:
    """Linear jobs: a third worker adds 1/2 to a job of 2, a fourth 1/3 to a job of 3 (prior: linear).

    Taking the fourth worker of ``holder`` for ``small`` (1 -> 2 adds 1) repays the two restarts;
    taking it for ``pair`` (2 -> 3 adds 1/2 against 1/3 held) does not.
    """
    holder = a_job("holder", ["n1"] * 4, low=1, high=8, gpus=1, created="2")
    small = a_job("small", ["n2"], low=1, high=8, gpus=1, created="1")
    assert sizes([holder, small], 5) == {"ml/holder": 3, "ml/small": 2}
    pair = a_job("pair", ["n2"] * 2, low=1, high=8, gpus=1, created="1")
    assert sizes([holder, pair], 6) == {"ml/holder": 4, "ml/pair": 2}


def test_least_attained_service_gives_the_new_job_the_next_worker_unless_off() -> None:
    old, new = a_job("old", [], low=1, high=8, gpus=1), a_job("new", [], low=1, high=8, gpus=1)
    served = {"ml/old": 36_000.0, "ml/new": 0.0}
    got = sizes([old, new], 8, attained=served)
    assert got["ml/new"] > got["ml/old"], "on by default: ten GPU-hours halve the old job's claim"
    off = replace(SETTINGS, las_seconds=None)
    assert sizes([old, new], 8, attained=served, settings=off) == {"ml/old": 4, "ml/new": 4}


def test_long_jobs_are_served_oldest_first_not_shared_among() -> None:
    """Two long jobs of like attained service: the older one gets the workers, not half each."""
    first = a_job("first", [], low=1, high=8, gpus=1, created="1")
    second = a_job("second", [], low=1, high=8, gpus=1, created="2")
    served = {"ml/first": 200_000.0, "ml/second": 100_000.0}  # the younger has run less
    got = sizes([first, second], 10, attained=served)
    assert got["ml/first"] > got["ml/second"], got
    alike = replace(SETTINGS, las_seconds=None, long_after_seconds=None)
    assert sizes([first, second], 10, attained=served, settings=alike) == {"ml/first": 5, "ml/second": 5}
    falling = replace(SETTINGS, long_after_seconds=None)  # the claim falls with attained service alone
    shared = sizes([first, second], 10, attained=served, settings=falling)
    assert shared["ml/second"] > shared["ml/first"], shared


def test_the_fewest_nodes_a_size_needs() -> None:
    assert [nodes_for(k, 1, 8) for k in (0, 1, 8, 9, 17)] == [0, 1, 1, 2, 3]
    assert nodes_for(3, 6, 8) == 3


jobs = st.lists(
    st.tuples(
        st.integers(1, 3), st.integers(0, 4), st.sampled_from([1, 2, 4]), st.sampled_from(["qa", "qb"])
    ),
    min_size=1,
    max_size=5,
)
curves = st.lists(st.floats(0.1, 1.0), min_size=5, max_size=5)


@given(jobs, st.integers(0, 64), st.integers(-8, 16), curves)
def test_sizes_stay_within_min_max_and_the_pool(
    spec: list[tuple[int, int, int, str]], pool: int, deficit: int, efficiency: list[float]
) -> None:
    built = [
        a_job(f"j{i}", [], queue=q, low=low, high=low + extra, gpus=gpus)
        for i, (low, extra, gpus, q) in enumerate(spec)
    ]
    models = {
        j.key: fit([Sample(1, 1, 10.0), Sample(4, 1, 40.0 * e)])
        for j, e in zip(built, efficiency, strict=False)
    }
    deficits = {"qa": deficit, "qb": 0}
    got = sizes(built, pool, models, deficits=deficits)
    assert got == sizes(list(reversed(built)), pool, models, deficits=deficits), "input order changes nothing"
    floor = sum(j.min_workers * j.worker.gpus for j in built)
    above = sum((got[j.key] - j.min_workers) * j.worker.gpus for j in built)
    assert above <= max(0, pool - floor)
    assert all(j.min_workers <= got[j.key] <= j.max_workers for j in built)
    room = max(0, pool - floor) - above  # GPUs left over: none a job below its maximum could take
    assert all(got[j.key] == j.max_workers or j.worker.gpus > room for j in built), "no GPU left idle"
