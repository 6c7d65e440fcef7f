from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from scheduling.elastic.throughput import PRIOR, Sample, Throughput, fit

CONFIGS = [(1, 1), (2, 1), (3, 1), (4, 1), (4, 2), (6, 2), (8, 2), (12, 3), (16, 4)]
rates = st.floats(0.1, 1000.0, allow_nan=False, allow_infinity=False)
sample_lists = st.lists(st.tuples(st.sampled_from(CONFIGS), rates), min_size=0, max_size=8)


def samples_of(drawn: list[tuple[tuple[int, int], float]]) -> list[Sample]:
    return [Sample(k, n, x) for (k, n), x in drawn]


def test_a_job_never_seen_is_predicted_to_scale_linearly() -> None:
    assert fit([]) == PRIOR
    assert [PRIOR.speedup(k) for k in (1, 2, 8)] == [1.0, 2.0, 8.0]


def test_a_job_seen_at_one_size_is_linear_through_that_size() -> None:
    model = fit([Sample(4, 1, 40.0)])
    assert math.isclose(model.rate(4), 40.0, rel_tol=1e-6)
    assert math.isclose(model.speedup(8), 8.0, rel_tol=1e-6)


def test_spreading_is_never_predicted_free_once_one_node_showed_a_cost() -> None:
    model = fit([Sample(1, 1, 10.0), Sample(4, 1, 30.0)])
    assert model.speedup(4, nodes=2) <= model.speedup(4, nodes=1)


@given(sample_lists, st.sampled_from(CONFIGS))
def test_never_above_the_linear_bound(
    drawn: list[tuple[tuple[int, int], float]], at: tuple[int, int]
) -> None:
    model = fit(samples_of(drawn))
    assert model.speedup(*at) <= at[0] * (1 + 1e-9)


@given(sample_lists, st.sampled_from(CONFIGS), rates, st.floats(1.01, 3.0))
def test_a_job_observed_faster_is_never_predicted_slower_there(
    drawn: list[tuple[tuple[int, int], float]], at: tuple[int, int], rate: float, factor: float
) -> None:
    before = fit([*samples_of(drawn), Sample(*at, rate)])
    after = fit([*samples_of(drawn), Sample(*at, rate * factor)])
    assert after.rate(*at) >= before.rate(*at) * (1 - 1e-6)


def truth() -> Throughput:
    return Throughput(compute=1.0, intra=(0.15, 0.02), inter=(0.5, 0.05))


@given(st.lists(st.floats(-0.03, 0.03), min_size=len(CONFIGS), max_size=len(CONFIGS)))
def test_recovers_a_known_curve_from_noisy_samples(noise: list[float]) -> None:
    real = truth()
    seen = [Sample(k, n, real.rate(k, n) * (1 + e)) for (k, n), e in zip(CONFIGS, noise, strict=True)]
    model = fit(seen)
    for k, n in [*CONFIGS, (6, 1), (24, 6)]:
        assert math.isclose(model.speedup(k, n), real.speedup(k, n), rel_tol=0.15), (k, n)
    assert model.spread < 0.05


def test_the_description_names_its_basis() -> None:
    assert PRIOR.describe(4) == (
        "predicted speedup 4.00x at 4 workers on 1 node (no throughput reported yet: linear scaling assumed)"
    )
    text = fit([Sample(1, 1, 10.0), Sample(4, 1, 30.0)]).describe(4)
    assert text.startswith("predicted speedup 3.00x at 4 workers on 1 node (fitted on 2 samples")


def test_spreading_counts_free_only_where_a_sample_across_nodes_measured_it_so() -> None:
    one_node = [Sample(1, 1, 10.0), Sample(2, 1, 20.0), Sample(4, 1, 40.0)]  # linear on one node
    assert not PRIOR.spreads_free(4, fewest=1), "the prior predicts spread free: no measurement"
    assert not fit(one_node).spreads_free(4, fewest=1), "predicted as fast, never measured across nodes"
    cheap = fit([*one_node, Sample(4, 2, 39.0)])
    dear = fit([*one_node, Sample(4, 2, 28.0)])
    assert cheap.across_nodes and dear.across_nodes
    assert cheap.spreads_free(4, fewest=1)
    assert not dear.spreads_free(4, fewest=1), "30% slower spread over two nodes"
    assert not cheap.spreads_free(1, fewest=1), "one worker spreads over nothing"


@given(sample_lists, st.integers(1, 16))
def test_spreading_is_free_only_for_a_model_fitted_across_nodes(
    drawn: list[tuple[tuple[int, int], float]], workers: int
) -> None:
    model = fit(samples_of(drawn))
    if model.spreads_free(workers, fewest=1):
        assert any(n > 1 for (_, n), _ in drawn)
