"""Kubernetes resource quantities as integers.

The API writes quantities as strings ("500m", "16Gi", "2"). The core keeps CPU in milli-cores and memory
in bytes, both integers, so comparisons are exact and sums never drift (style.md house rule 7).
"""

from __future__ import annotations

from decimal import ROUND_CEILING, Decimal, InvalidOperation

BINARY_SUFFIXES = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "": Decimal(1),
    "k": Decimal("1e3"),
    "M": Decimal("1e6"),
    "G": Decimal("1e9"),
    "T": Decimal("1e12"),
    "P": Decimal("1e15"),
    "E": Decimal("1e18"),
}
_MAX_LEN = 64


class QuantityError(ValueError):
    """A resource quantity string that Kubernetes would not accept either."""


def _split(text: str) -> tuple[str, str]:
    for suffix in BINARY_SUFFIXES:
        if text.endswith(suffix):
            return text[: -len(suffix)], suffix
    # A trailing letter is a decimal SI suffix; "1E3" ends in a digit, so it stays an exponent.
    if text and text[-1] in "numkMGTPE":
        return text[:-1], text[-1]
    return text, ""


def parse_quantity(text: object) -> Decimal:
    """Parse a Kubernetes quantity into an exact decimal of base units.

    Args:
        text: the quantity as the API serialises it, e.g. ``"500m"``, ``"16Gi"``, ``"2"``, or an int.

    Returns:
        The value in base units (cores, bytes, devices).

    Raises:
        QuantityError: the value is not a valid, non-negative quantity.

    >>> parse_quantity("500m")
    Decimal('0.500')
    >>> parse_quantity("2Gi") == 2 * 2**30
    True
    """
    if isinstance(text, bool):
        msg = f"quantity must be a string or number, got {text!r}"
        raise QuantityError(msg)
    if isinstance(text, int):
        text = str(text)
    if not isinstance(text, str) or not text or len(text) > _MAX_LEN:
        msg = f"quantity must be a non-empty string, got {text!r}"
        raise QuantityError(msg)
    number, suffix = _split(text.strip())
    try:
        value = Decimal(number)
    except InvalidOperation:
        msg = f"{text!r} is not a Kubernetes quantity"
        raise QuantityError(msg) from None
    if not value.is_finite() or value < 0:
        msg = f"{text!r} is not a finite, non-negative quantity"
        raise QuantityError(msg)
    if suffix in BINARY_SUFFIXES:
        return value * BINARY_SUFFIXES[suffix]
    return value * _DECIMAL[suffix]


def to_milli(text: object) -> int:
    """Return a quantity in milli-units, rounded up as Kubernetes does for requests.

    >>> to_milli("1.5")
    1500
    >>> to_milli("100m")
    100
    """
    return int((parse_quantity(text) * 1000).to_integral_value(rounding=ROUND_CEILING))


def to_units(text: object) -> int:
    """Return a quantity in whole base units (bytes, devices), rounded up.

    >>> to_units("1Ki")
    1024
    >>> to_units("8")
    8
    """
    return int(parse_quantity(text).to_integral_value(rounding=ROUND_CEILING))
