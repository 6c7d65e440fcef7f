"""Kubernetes resource quantities as bounded integers.

The API writes quantities as strings ("500m", "16Gi", "2"). The core keeps CPU in milli-cores and memory
in bytes, both integers, so comparisons are exact and sums never drift (docs/design/style.md §7).

Requests come from outside the process, so the parser is built to be hostile-input safe rather than
merely correct on good input (a request's text must never cost unbounded time or memory):

- it accepts exactly the grammar of ``k8s.io/apimachinery`` ``resource.Quantity``
  (``<signedNumber><suffix>``: ASCII digits only, an optional ``.``, then one of the binary suffixes
  ``Ki Mi Gi Ti Pi Ei``, the decimal suffixes ``n u m k M G T P E`` or none, or an exponent
  ``e``/``E`` with a signed integer); no spaces, underscores or non-ASCII digits, which Python's
  ``Decimal`` and ``int`` would let through;
- its work is linear in the text, which is at most :data:`MAX_TEXT` characters, and no integer it builds
  has more than about a hundred digits: the magnitude is decided from the digit count and the exponent
  before any arithmetic, so ``1e999999`` is refused at once instead of becoming a million-digit int;
- a value above :data:`MAX_QUANTITY` base units is refused with a reason. The API server clamps such a
  value to that bound when it stores an object, so an object read from it never exceeds it; only a
  request that did not come through it can, and that request gets HTTP 400.

A positive value below one nano-unit rounds up to 1n, as the API server rounds it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

BINARY_SUFFIXES = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_BINARY_SHIFT = {suffix: factor.bit_length() - 1 for suffix, factor in BINARY_SUFFIXES.items()}
_DECIMAL_EXPONENT = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}

MAX_QUANTITY = 2**63 - 1
"""The largest amount, in base units (cores, bytes, devices), the API server stores (``maxAllowed``)."""

MAX_TEXT = 64
"""The longest quantity text accepted; the longest canonical form the API server writes has 20."""

_NANO = 10**9
_MAX_DIGITS = len(str(MAX_QUANTITY))  # 19: any value with its leading digit at 10**19 or above is too big
_SHIFT_DIGITS = 19  # 2**60, the largest binary suffix, is below 10**19
_GRAMMAR = re.compile(r"([+-]?)([0-9]*)(?:\.([0-9]*))?(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?[0-9]+)?")


class QuantityError(ValueError):
    """A resource quantity that Kubernetes would not accept, or one beyond what it stores."""


@dataclass(frozen=True, slots=True)
class Quantity:
    """A non-negative quantity in nano base units, exact (the API server's finest resolution).

    Attributes:
        nano: the amount in units of 10**-9 cores, bytes or devices; at most ``MAX_QUANTITY * 10**9``.
    """

    nano: int

    def milli(self) -> int:
        """The amount in milli-units, rounded up as Kubernetes rounds requests."""
        return -(-self.nano // 10**6)

    def units(self) -> int:
        """The amount in whole base units (bytes, devices), rounded up."""
        return -(-self.nano // _NANO)


def _shown(text: str) -> str:
    """``text`` quoted for a message, cut so that a reason never grows with the input."""
    return repr(text) if len(text) <= 24 else repr(text[:20]) + f"... ({len(text)} characters)"


def parse_quantity(text: object) -> Quantity:
    """Parse a Kubernetes quantity; see the module docstring for the grammar and the bounds.

    Args:
        text: the quantity as the API serialises it, e.g. ``"500m"``, ``"16Gi"``, ``"2"``, or an int.

    Returns:
        The exact value, rounded up to a whole nano-unit.

    Raises:
        QuantityError: ``text`` is not a quantity in the grammar, is negative, or is above
            :data:`MAX_QUANTITY` base units; the message says which.

    >>> parse_quantity("500m").milli(), parse_quantity("2Gi").units() == 2 * 2**30
    (500, True)
    """
    if isinstance(text, int) and not isinstance(text, bool):
        if not 0 <= text <= MAX_QUANTITY:
            msg = f"the integer quantity is outside 0..{MAX_QUANTITY}"
            raise QuantityError(msg)
        return Quantity(text * _NANO)
    if not isinstance(text, str):
        msg = f"a quantity must be a string such as '500m' or '16Gi', got {type(text).__name__}"
        raise QuantityError(msg)
    if len(text) > MAX_TEXT:
        msg = f"quantity {_shown(text)} is longer than {MAX_TEXT} characters"
        raise QuantityError(msg)
    found = _GRAMMAR.fullmatch(text)
    if found is None or not (found[2] or found[3]):
        msg = (
            f"{_shown(text)} is not a Kubernetes quantity (ASCII digits with an optional '.', then a "
            "suffix such as m, k, Mi, Gi or an exponent such as e3; no spaces)"
        )
        raise QuantityError(msg)
    sign, whole, fraction, suffix = found[1], found[2], found[3] or "", found[4] or ""
    digits = (whole + fraction).lstrip("0")
    if not digits:
        return Quantity(0)
    if sign == "-":
        msg = f"{_shown(text)} is negative"
        raise QuantityError(msg)
    shift = _BINARY_SHIFT.get(suffix, 0)
    if suffix in _DECIMAL_EXPONENT or suffix in _BINARY_SHIFT:
        exponent = _DECIMAL_EXPONENT.get(suffix, 0)
    else:  # "e3", "E-2": at most MAX_TEXT digits, a small int however large the value it means
        exponent = int(suffix[1:])
    # The value is int(digits) * 10**scale * 2**shift nano-units; its leading digit sits at 10**top.
    scale = exponent - len(fraction) + 9
    top = len(digits) - 1 + scale - 9
    if top >= _MAX_DIGITS:
        return _too_big(text)
    if scale >= 0:
        nano = (int(digits) * 10**scale) << shift
    elif -scale >= len(digits) + _SHIFT_DIGITS:
        nano = 1  # below one nano-unit (int(digits) << shift < 10**-scale): the API server rounds up
    else:
        nano = -(-(int(digits) << shift) // 10**-scale)
    if nano > MAX_QUANTITY * _NANO:
        return _too_big(text)
    return Quantity(nano)


def _too_big(text: str) -> Quantity:
    msg = f"{_shown(text)} is more than the largest quantity Kubernetes stores ({MAX_QUANTITY})"
    raise QuantityError(msg)


def to_milli(text: object) -> int:
    """Return a quantity in milli-units, rounded up as Kubernetes does for requests.

    >>> to_milli("1.5")
    1500
    >>> to_milli("100m")
    100
    """
    return parse_quantity(text).milli()


def to_units(text: object) -> int:
    """Return a quantity in whole base units (bytes, devices), rounded up.

    >>> to_units("1Ki")
    1024
    >>> to_units("8")
    8
    """
    return parse_quantity(text).units()
