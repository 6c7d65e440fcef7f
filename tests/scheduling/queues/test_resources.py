from __future__ import annotations

import pytest

from scheduling.model import Resources
from scheduling.resources import (
    amount,
    format_quantity,
    minus,
    plus,
    resources_of,
    shortfall,
    total,
    within,
)


def test_arithmetic_is_per_resource() -> None:
    a, b = Resources(1000, 2**30, 2), Resources(500, 2**30, 3)
    assert plus(a, b) == Resources(1500, 2**31, 5)
    assert minus(a, b) == Resources(500, 0, -1)
    assert total([a, b, a]) == Resources(2500, 3 * 2**30, 7)
    assert shortfall(a, b) == Resources(500, 0, 0)
    assert within(b, plus(a, b)) and not within(a, b)


def test_quantities_read_like_kubectl() -> None:
    assert format_quantity("cpu", 4000) == "4 CPU"
    assert format_quantity("memory", 3 * 2**20) == "3Mi memory"
    assert format_quantity("memory", 0) == "0 memory"


def test_unknown_resources_are_refused() -> None:
    with pytest.raises(ValueError, match="unknown resource 'pods'"):
        amount(Resources(), "pods")
    with pytest.raises(ValueError, match="unknown resource 'pods'"):
        resources_of({"pods": 3})
