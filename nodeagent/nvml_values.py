"""Conversions between NVML's raw values and the topology document's text forms.

NVML spells the same PCI address differently depending on the call: ``nvmlDeviceGetPciInfo`` fills
``busId`` as ``00000000:07:00.0`` (8-digit domain, upper-case hex) and ``busIdLegacy`` as
``0000:07:00.0``, and a remote NVLink end may come back in either form. Comparing the strings would
miss NVLink peers, so addresses are compared as numbers (docs/design/nvlink-topology.md §2.1: normalise case
and the domain prefix; go-gpuallocator lower-cases and strips the leading ``0000``). CPU affinity arrives as
an array of 64-bit masks and the document stores a Linux cpulist.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import NamedTuple

_BUS_RE = re.compile(
    r"(?:(?P<domain>[0-9a-fA-F]{1,8}):)?(?P<bus>[0-9a-fA-F]{1,2}):(?P<device>[0-9a-fA-F]{1,2})\.(?P<fn>[0-7])"
)
MASK_BITS = 64
"""Bits in one word of ``nvmlDeviceGetCpuAffinity``'s array (``unsigned long`` on 64-bit Linux)."""


class BusKey(NamedTuple):
    """A PCI address as numbers, so that ``0000:b7:00.0`` and ``00000000:B7:00.0`` compare equal."""

    domain: int
    bus: int
    device: int
    function: int

    @property
    def canonical(self) -> str:
        """NVML's own ``busId`` form, the one the document stores: ``00000000:B7:00.0``."""
        return f"{self.domain:08X}:{self.bus:02X}:{self.device:02X}.{self.function:X}"

    @property
    def legacy(self) -> str:
        """The short form some calls and tools print: ``0000:b7:00.0`` (lower case, 4-digit domain)."""
        return f"{self.domain:04x}:{self.bus:02x}:{self.device:02x}.{self.function:x}"


def text_of(value: object) -> str:
    """A string field of an NVML struct as text: pynvml decodes ``char`` arrays, older versions do not."""
    if isinstance(value, bytes):
        return value.decode("ascii", "replace")
    return value if isinstance(value, str) else ""


def parse_bus_id(text: str) -> BusKey | None:
    """Read a PCI address in any of NVML's spellings; ``None`` when it is not one.

    >>> parse_bus_id("00000000:B7:00.0") == parse_bus_id("0000:b7:00.0") == parse_bus_id("b7:00.0")
    True
    >>> parse_bus_id("") is None
    True
    """
    match = _BUS_RE.fullmatch(text.strip().rstrip("\x00"))
    if match is None:
        return None
    return BusKey(
        int(match["domain"] or "0", 16), int(match["bus"], 16), int(match["device"], 16), int(match["fn"])
    )


def bus_of(pci_info: object) -> BusKey | None:
    """The address in an ``nvmlPciInfo_t``: ``busId``, else the legacy field, else ``None``."""
    for field in ("busId", "busIdLegacy"):
        key = parse_bus_id(text_of(getattr(pci_info, field, "")))
        if key is not None:
            return key
    return None


def cpulist_from_mask(words: Iterable[int]) -> str | None:
    """The Linux cpulist of an affinity mask (word ``w``, bit ``i`` is CPU ``64*w + i``); ``None`` if empty.

    >>> cpulist_from_mask([0x0000_00FF_00FF_FFFF, 0x00FF_0000_0000_00FF])
    '0-23,32-39,64-71,112-119'
    """
    cpus = [
        word_index * MASK_BITS + bit
        for word_index, word in enumerate(words)
        for bit in range(MASK_BITS)
        if int(word) >> bit & 1
    ]
    return format_cpulist(cpus) if cpus else None


def format_cpulist(cpus: Sequence[int]) -> str:
    """Sorted CPU numbers as ranges, the way Linux and ``nvidia-smi topo -m`` print them.

    >>> format_cpulist([0, 1, 2, 5, 7, 8])
    '0-2,5,7-8'
    """
    ranges: list[str] = []
    ordered = sorted(set(cpus))
    start = previous = ordered[0]
    for cpu in [*ordered[1:], None]:
        if cpu is not None and cpu == previous + 1:
            previous = cpu
            continue
        ranges.append(str(start) if start == previous else f"{start}-{previous}")
        if cpu is not None:
            start = previous = cpu
    return ",".join(ranges)


def mask_from_cpulist(cpulist: str, words: int) -> list[int]:
    """The affinity mask of a cpulist, ``words`` words long; CPUs beyond it are dropped, as NVML does.

    >>> [hex(w) for w in mask_from_cpulist("0-3,64", 2)]
    ['0xf', '0x1']
    """
    mask = [0] * words
    for part in cpulist.split(","):
        low, _, high = part.partition("-")
        for cpu in range(int(low), int(high or low) + 1):
            if cpu < words * MASK_BITS:
                mask[cpu // MASK_BITS] |= 1 << (cpu % MASK_BITS)
    return mask
