from __future__ import annotations

import pytest

from scheduling.quantity import QuantityError, to_milli, to_units


@pytest.mark.parametrize(
    ("text", "milli"),
    [
        ("1", 1000),
        ("500m", 500),
        ("0.1", 100),
        ("2.5", 2500),
        ("1k", 1_000_000),
        (3, 3000),
        ("1e3", 1_000_000),
    ],
    ids=str,
)
def test_cpu_in_milli_cores(text: object, milli: int) -> None:
    assert to_milli(text) == milli


@pytest.mark.parametrize(
    ("text", "units"),
    [("1Ki", 1024), ("16Gi", 16 * 2**30), ("1G", 10**9), ("1.5Mi", 1572864), ("100m", 1), ("0", 0)],
    ids=str,
)
def test_memory_and_devices_in_whole_units_rounded_up(text: str, units: int) -> None:
    assert to_units(text) == units


@pytest.mark.parametrize("bad", ["", "abc", "-1", "1Qi", "nan", "inf", None, True, [], "1" * 100], ids=repr)
def test_invalid_quantities_are_rejected(bad: object) -> None:
    with pytest.raises(QuantityError):
        to_milli(bad)
