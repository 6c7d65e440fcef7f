from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nodeagent.fake_nvml import FakePciInfo
from nodeagent.nvml_values import (
    BusKey,
    bus_of,
    cpulist_from_mask,
    format_cpulist,
    mask_from_cpulist,
    parse_bus_id,
)
from scheduling.topology.gpu_info import BUS_ID_RE, CPU_LIST_RE


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("00000000:07:00.0", BusKey(0, 7, 0, 0)),
        ("0000:07:00.0", BusKey(0, 7, 0, 0)),
        ("0000:b7:00.0", BusKey(0, 0xB7, 0, 0)),
        ("00000000:B7:00.0", BusKey(0, 0xB7, 0, 0)),
        ("00000001:1A:02.3", BusKey(1, 0x1A, 2, 3)),
        ("b7:00.0", BusKey(0, 0xB7, 0, 0)),
        (" 00000000:07:00.0\x00", BusKey(0, 7, 0, 0)),
        ("", None),
        ("GPU-1234", None),
        ("0000:07:00.8", None),
        ("000000000:07:00.0", None),
    ],
    ids=[
        "nvml-long",
        "nvml-legacy",
        "lower-case",
        "upper-case",
        "domain-function",
        "no-domain",
        "padded",
        "empty",
        "not-an-address",
        "bad-function",
        "domain-too-long",
    ],
)
def test_bus_ids_compare_as_numbers(text: str, key: BusKey | None) -> None:
    assert parse_bus_id(text) == key


def test_canonical_form_is_nvml_and_fits_the_document() -> None:
    key = BusKey(0, 0xB7, 0, 0)
    assert key.canonical == "00000000:B7:00.0"
    assert key.legacy == "0000:b7:00.0"
    assert BUS_ID_RE.fullmatch(key.canonical)


@dataclass(frozen=True)
class Info:
    busId: str | bytes  # noqa: N815 - pynvml's field names; old pynvml left them as bytes
    busIdLegacy: str | bytes  # noqa: N815


@pytest.mark.parametrize(
    ("info", "key"),
    [
        (FakePciInfo("00000000:07:00.0", "0000:07:00.0"), BusKey(0, 7, 0, 0)),
        (Info("", "0000:08:00.0"), BusKey(0, 8, 0, 0)),
        (Info(b"0000:09:00.0", ""), BusKey(0, 9, 0, 0)),
        (Info("", ""), None),
        (object(), None),
    ],
    ids=["both", "legacy-only", "bytes", "empty", "no-fields"],
)
def test_bus_of_a_pci_info(info: object, key: BusKey | None) -> None:
    assert bus_of(info) == key


@pytest.mark.parametrize(
    ("words", "cpulist"),
    [
        ([0xFFFFFF | 0xFFFF << 48, 0xFFFFFF], "0-23,48-87"),
        ([0, 0], None),
        ([1], "0"),
        ([0b101], "0,2"),
        ([0, 1 << 63], "127"),
    ],
    ids=["two-ranges", "empty", "single", "gap", "last-bit"],
)
def test_cpulist_from_mask(words: list[int], cpulist: str | None) -> None:
    assert cpulist_from_mask(words) == cpulist


@given(st.sets(st.integers(0, 4095), min_size=1, max_size=300))
def test_cpulists_round_trip_through_masks(cpus: set[int]) -> None:
    text = format_cpulist(sorted(cpus))
    assert cpulist_from_mask(mask_from_cpulist(text, 64)) == text
    if text.count(",") < 256:
        assert CPU_LIST_RE.fullmatch(text)


def test_cpus_beyond_the_mask_are_dropped() -> None:
    assert mask_from_cpulist("0,64-65", 1) == [1]
