from __future__ import annotations

from fractions import Fraction

import pytest

from scheduling.queues.recent_usage import UsageSample, UsageWeighting, decayed_usage, normalized_usage


def test_usage_halves_every_half_life() -> None:
    samples = [UsageSample(at=0, amount=800), UsageSample(at=3600, amount=800)]
    assert decayed_usage(samples, now=7200, half_life_seconds=3600) == 200 + 400
    assert (
        decayed_usage(samples, now=0, half_life_seconds=3600) == 1600
    )  # a sample "from the future" counts fully


def test_usage_needs_a_positive_half_life_and_capacity() -> None:
    with pytest.raises(ValueError, match="half_life_seconds must be positive"):
        decayed_usage([], now=0, half_life_seconds=0)
    with pytest.raises(ValueError, match="capacity_seconds must be positive"):
        normalized_usage({}, capacity_seconds=0)


def test_normalized_usage_is_a_fraction_of_capacity() -> None:
    assert dict(normalized_usage({"a": 50.0, "b": 500.0, "c": -1.0}, capacity_seconds=100)) == {
        "a": 0.5,
        "b": 1.0,
        "c": 0.0,
    }


@pytest.mark.parametrize(
    ("usage", "k", "expected"),
    [
        pytest.param(
            {}, 1.0, {"a": Fraction(1, 2), "b": Fraction(3, 2)}, id="no usage: in proportion to the weights"
        ),
        pytest.param(
            {"a": 0.25, "b": 0.75}, 1.0, {"a": Fraction(1, 4), "b": Fraction(3, 4)}, id="used as deserved"
        ),
        pytest.param({"b": 0.75}, 1.0, {"a": Fraction(1, 2), "b": Fraction(3, 4)}, id="unused queue gains"),
        pytest.param({"a": 1.0}, 1.0, {"a": Fraction(0), "b": Fraction(3, 2)}, id="clamped at zero"),
        pytest.param({"a": 1.0}, 0.0, {"a": Fraction(1, 4), "b": Fraction(3, 4)}, id="k 0 turns it off"),
        pytest.param(
            {"a": 1.0, "b": 1.0}, 10.0, {"a": Fraction(1, 4), "b": Fraction(3, 4)}, id="all zero: fall back"
        ),
    ],
)
def test_share_weights(usage: dict[str, float], k: float, expected: dict[str, Fraction]) -> None:
    weights = {"a": Fraction(1), "b": Fraction(3)}
    assert UsageWeighting(usage, k).share_weights(weights) == expected
