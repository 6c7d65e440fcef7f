from __future__ import annotations

from decimal import ROUND_CEILING, Decimal, localcontext

import pytest
from hypothesis import given
from hypothesis import strategies as st

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


# Hostile and extreme input: the grammar of resource.Quantity, bounded, checked against an
# independent oracle (Decimal at a precision far above any value the strategies make).

MAX_QUANTITY = 2**63 - 1  # resource.Quantity's maxAllowed, in base units

SUFFIXES = ["Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "n", "u", "m", "", "k", "M", "G", "T", "P", "E"]


@st.composite
def grammar_quantities(draw: st.DrawFn, max_exponent: int = 40) -> tuple[str, Decimal | None]:
    """A quantity in the API server's grammar, and its exact value in base units (None if negative)."""
    whole = draw(st.text("0123456789", max_size=12))
    fraction = draw(st.none() | st.text("0123456789", max_size=12))
    if not whole and not fraction:
        whole = "0"
    sign = draw(st.sampled_from(["", "+", "-"]))
    number = whole + ("" if fraction is None else "." + fraction)
    value = Decimal(number if number[0] != "." else "0" + number) if number != "." else Decimal(0)
    if draw(st.booleans()):
        exponent = draw(st.integers(-max_exponent, max_exponent))
        letter, plus = draw(st.sampled_from("eE")), draw(st.sampled_from(["", "+"]))
        suffix = f"{letter}{plus if exponent >= 0 else ''}{exponent}"
        factor = Decimal(10) ** exponent
    else:
        suffix = draw(st.sampled_from(SUFFIXES))
        factor = Decimal(2 ** BINARY[suffix]) if suffix in BINARY else Decimal(10) ** DECIMAL[suffix]
    if sign == "-" and value != 0:
        return sign + number + suffix, None
    with localcontext() as ctx:
        ctx.prec = 400  # exact: 24 digits times a power of ten or of two below 2**61
        return sign + number + suffix, value * factor


BINARY = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}


@given(grammar_quantities())
def test_grammar_quantities_parse_exactly_or_are_refused(case: tuple[str, Decimal | None]) -> None:
    text, value = case
    with localcontext() as ctx:
        ctx.prec = 400
        if value is None:
            with pytest.raises(QuantityError, match="is negative"):
                to_units(text)
            return
        if value > MAX_QUANTITY:
            with pytest.raises(QuantityError, match="more than the largest quantity"):
                to_units(text)
        else:
            # Rounded up to a nano-unit first, as the API server stores it, then to the core's unit.
            nano = int((value * 10**9).to_integral_value(rounding=ROUND_CEILING))
            assert to_milli(text) == -(-nano // 10**6)
            assert to_units(text) == -(-nano // 10**9)


@given(
    digits=st.text("123456789", min_size=1, max_size=8),
    exponent=st.integers(19, 10**50),
    letter=st.sampled_from("eE"),
)
def test_huge_exponents_are_refused_unbuilt(digits: str, exponent: int, letter: str) -> None:
    with pytest.raises(QuantityError, match="more than the largest quantity Kubernetes stores"):
        to_units(f"{digits}{letter}{exponent}")


@given(digits=st.text("123456789", min_size=1, max_size=8), exponent=st.integers(40, 10**50))
def test_tiny_positive_values_round_up_to_one_nano_unit(digits: str, exponent: int) -> None:
    assert (to_milli(f"{digits}e-{exponent}"), to_units(f"{digits}e-{exponent}")) == (1, 1)


@given(case=grammar_quantities(), where=st.integers(0, 40), intruder=st.sampled_from(["_", " ", "\t", "\n"]))
def test_underscores_and_spaces_are_refused(case: tuple[str, object], where: int, intruder: str) -> None:
    text = case[0]
    at = min(where, len(text))
    with pytest.raises(QuantityError, match="is not a Kubernetes quantity"):
        to_units(text[:at] + intruder + text[at:])


@given(
    case=grammar_quantities(),
    digit=st.characters(categories=["Nd"]).filter(lambda c: not c.isascii()),
    where=st.integers(0, 40),
)
def test_non_ascii_digits_are_refused(case: tuple[str, object], digit: str, where: int) -> None:
    text = case[0]
    at = min(where, len(text))
    with pytest.raises(QuantityError, match="is not a Kubernetes quantity"):
        to_units(text[:at] + digit + text[at:])


@given(st.integers(min_value=MAX_QUANTITY + 1) | st.integers(max_value=-1))
def test_integers_outside_the_stored_range_are_refused(value: int) -> None:
    with pytest.raises(QuantityError, match=r"outside 0\.\."):
        to_units(value)


@pytest.mark.parametrize("text", ["9" * 5000, "1" + "0" * 100, "0" * 65], ids=len)
def test_long_texts_are_refused_with_a_short_reason(text: str) -> None:
    with pytest.raises(QuantityError) as refused:
        to_units(text)
    assert len(str(refused.value)) < 200


@pytest.mark.parametrize(
    ("text", "units"),
    [("9223372036854775807", MAX_QUANTITY), ("7Ei", 7 * 2**60), ("9.223372036854775807E", MAX_QUANTITY)],
)
def test_the_largest_stored_quantities_are_accepted(text: str, units: int) -> None:
    assert to_units(text) == units


@pytest.mark.parametrize("text", ["9223372036854775808", "8Ei", "1e19", "9.3E"])
def test_just_above_the_largest_is_refused(text: str) -> None:
    with pytest.raises(QuantityError, match="more than the largest"):
        to_units(text)
