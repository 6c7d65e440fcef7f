from __future__ import annotations

from fractions import Fraction

import pytest

from scheduling.model import Resources
from scheduling.queues.drf import dominant_resource, dominant_share

CLUSTER = Resources(milli_cpu=100_000, memory=1000 * 2**30, gpus=40)


@pytest.mark.parametrize(
    ("allocated", "share", "resource"),
    [
        pytest.param(Resources(), Fraction(0), "nvidia.com/gpu", id="nothing held"),
        pytest.param(Resources(10_000, 10 * 2**30, 20), Fraction(1, 2), "nvidia.com/gpu", id="GPU dominant"),
        pytest.param(Resources(60_000, 10 * 2**30, 8), Fraction(3, 5), "cpu", id="CPU dominant"),
        pytest.param(
            Resources(0, 500 * 2**30, 20), Fraction(1, 2), "nvidia.com/gpu", id="tie: GPU named first"
        ),
    ],
)
def test_dominant_share(allocated: Resources, share: Fraction, resource: str) -> None:
    assert dominant_share(allocated, CLUSTER) == share
    assert dominant_resource(allocated, CLUSTER) == resource


def test_a_resource_the_cluster_lacks_counts_only_when_used() -> None:
    no_gpus = Resources(milli_cpu=1000, memory=2**30)
    assert dominant_share(Resources(milli_cpu=500), no_gpus) == Fraction(1, 2)
    assert dominant_share(Resources(gpus=1), no_gpus) == 1
