"""The kinds of connection between two GPUs, named the way ``nvidia-smi topo -m`` names them.

``topo -m`` prints one label per GPU pair: ``NV#`` (a bonded set of # NVLinks) or a PCIe level
(``PIX`` ⊂ ``PXB`` ⊂ ``PHB`` ⊂ ``NODE`` ⊂ ``SYS``; docs/design/nvlink-topology.md §2.2). NVML reports both
facts for an NVLink pair (the PCIe common ancestor *and* the link count), so a :class:`GpuLink` can carry
both; text imported from ``topo -m`` only has the NVLink count for such pairs. The text form ``NV4/PIX`` holds
both facts; ``NV4`` and ``PIX`` hold one each.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import IntEnum

from scheduling.topology.topology_error import TopologyError

MAX_NVLINKS = 255
"""Upper bound accepted for the NVLink count of one pair (NVML has 36 link slots per GPU today)."""

_NV_RE = re.compile(r"NV([1-9][0-9]{0,2})")


class PcieLevel(IntEnum):
    """PCIe common-ancestor level of two GPUs; a larger value means a longer, slower path.

    The values follow the order of NVML's ``nvmlDeviceGetTopologyCommonAncestor`` levels
    (SINGLE, MULTIPLE, HOSTBRIDGE, NODE, SYSTEM; docs/design/nvlink-topology.md §2.2).
    """

    PIX = 1
    """At most one PCIe bridge (same PCIe switch)."""
    PXB = 2
    """Several PCIe bridges, no host bridge."""
    PHB = 3
    """Through a PCIe host bridge (the CPU)."""
    NODE = 4
    """Between host bridges within one NUMA node."""
    SYS = 5
    """Across the SMP interconnect between NUMA nodes (QPI/UPI/Infinity Fabric)."""


@dataclass(frozen=True, slots=True, order=True)
class GpuLink:
    """What connects GPU ``a`` and GPU ``b`` (``a < b``).

    Attributes:
        a: the lower GPU index.
        b: the higher GPU index.
        nvlinks: NVLinks between the two (``NV#``); on an NVSwitch node ``topo -m`` prints each GPU's
            switch link count here, not a dedicated bundle (docs/design/nvlink-topology.md §1).
        pcie: the PCIe level, or ``None`` when hidden (``topo -m`` prints ``NV#`` instead of it).
    """

    a: int
    b: int
    nvlinks: int = 0
    pcie: PcieLevel | None = None

    def __post_init__(self) -> None:
        if not 0 <= self.a < self.b:
            msg = f"a GPU link needs 0 <= a < b, got a={self.a} b={self.b}"
            raise TopologyError(msg)
        if not 0 <= self.nvlinks <= MAX_NVLINKS:
            msg = f"GPU{self.a}-GPU{self.b}: NVLink count {self.nvlinks} is outside 0..{MAX_NVLINKS}"
            raise TopologyError(msg)
        if self.nvlinks == 0 and self.pcie is None:
            msg = f"GPU{self.a}-GPU{self.b}: a link needs NVLinks, a PCIe level or both"
            raise TopologyError(msg)

    @property
    def kind(self) -> str:
        """The label ``nvidia-smi topo -m`` prints for this pair, e.g. ``NV4`` or ``NODE``."""
        return f"NV{self.nvlinks}" if self.nvlinks else _pcie_name(self.pcie)

    @property
    def text(self) -> str:
        """Both facts as text: ``NV4/PIX`` when the PCIe level of an NVLink pair is known, else :attr:`kind`.

        >>> GpuLink(0, 1, nvlinks=4, pcie=PcieLevel.PIX).text
        'NV4/PIX'
        >>> GpuLink(0, 1, pcie=PcieLevel.SYS).text
        'SYS'
        """
        if self.nvlinks and self.pcie is not None:
            return f"NV{self.nvlinks}/{self.pcie.name}"
        return self.kind


def _pcie_name(level: PcieLevel | None) -> str:
    return level.name if level is not None else "?"


def parse_link(a: int, b: int, text: str) -> GpuLink:
    """Parse the text form of one pair's link (``NV4``, ``SYS``, ``NV4/PIX``).

    Raises:
        TopologyError: the text is not a link kind (``X`` is not a link: it marks a GPU's own cell).

    >>> parse_link(0, 3, "NV2")
    GpuLink(a=0, b=3, nvlinks=2, pcie=None)
    >>> parse_link(1, 2, "NV12/PXB").pcie
    <PcieLevel.PXB: 2>
    """
    nv_part, slash, pcie_part = text.partition("/")
    if slash:
        nvlinks = _parse_nv(nv_part)
        if nvlinks is None or pcie_part not in PcieLevel.__members__:
            raise TopologyError(_bad_kind(a, b, text))
        return GpuLink(a, b, nvlinks=nvlinks, pcie=PcieLevel[pcie_part])
    nvlinks = _parse_nv(text)
    if nvlinks is not None:
        return GpuLink(a, b, nvlinks=nvlinks)
    if text in PcieLevel.__members__:
        return GpuLink(a, b, pcie=PcieLevel[text])
    raise TopologyError(_bad_kind(a, b, text))


def _parse_nv(text: str) -> int | None:
    match = _NV_RE.fullmatch(text)
    return int(match.group(1)) if match else None


def _bad_kind(a: int, b: int, text: str) -> str:
    return (
        f"GPU{a}-GPU{b}: {text!r} is not a link kind "
        "(expected NV<n>, PIX, PXB, PHB, NODE, SYS or NV<n>/<PCIe level>)"
    )
