"""One GPU of a node as the topology document records it, and the field checks documents share.

Kept apart from :mod:`scheduling.topology.document` so the document module holds the node-level record
and its JSON form only. Every check raises :class:`TopologyError` naming the field.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from scheduling.topology.topology_error import TopologyError

UUID_RE = re.compile(r"GPU-[0-9a-fA-F-]{8,64}")
BUS_ID_RE = re.compile(r"[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]")
CPU_LIST_RE = re.compile(r"[0-9]{1,5}(?:-[0-9]{1,5})?(?:,[0-9]{1,5}(?:-[0-9]{1,5})?){0,255}")
MODEL_RE = re.compile(r"[ -~]{1,128}")


@dataclass(frozen=True, slots=True)
class GpuInfo:
    """One GPU of the node.

    Attributes:
        index: NVML / ``nvidia-smi`` index, also its position in :attr:`TopologyDocument.gpus`.
        uuid: ``GPU-...`` as NVML reports it; ``None`` when unknown (text imported from ``topo -m``).
        pci_bus_id: PCI bus id (``00000000:07:00.0``), ``None`` when unknown.
        numa_node: the NUMA node nearest the GPU, ``None`` when unknown or spanning several.
        cpu_affinity: the CPUs nearest the GPU as a Linux cpulist (``0-23,48-71``), ``None`` when unknown.
    """

    index: int
    uuid: str | None = None
    pci_bus_id: str | None = None
    numa_node: int | None = None
    cpu_affinity: str | None = None

    def __post_init__(self) -> None:
        where = f"GPU{self.index}"
        if self.index < 0:
            msg = f"GPU index {self.index} is negative"
            raise TopologyError(msg)
        check_pattern(self.uuid, UUID_RE, f"{where} uuid")
        check_pattern(self.pci_bus_id, BUS_ID_RE, f"{where} PCI bus id")
        check_pattern(self.cpu_affinity, CPU_LIST_RE, f"{where} CPU affinity")
        check_range(self.numa_node, 0, 4095, f"{where} NUMA node")

    @property
    def locality(self) -> int | str | None:
        """The key that says which GPUs share a CPU socket: NUMA node, else CPU affinity, else ``None``."""
        return self.numa_node if self.numa_node is not None else self.cpu_affinity


def check_pattern(value: str | None, pattern: re.Pattern[str], what: str) -> None:
    """Raise :class:`TopologyError` naming ``what`` unless ``value`` is ``None`` or matches ``pattern``."""
    if value is not None and not pattern.fullmatch(value):
        msg = f"{what} {value!r} is malformed"
        raise TopologyError(msg)


def check_range(value: int | None, low: int, high: int, what: str) -> None:
    """Raise :class:`TopologyError` naming ``what`` unless ``value`` is ``None`` or in ``low..high``."""
    if value is not None and not low <= value <= high:
        msg = f"{what} {value} is outside {low}..{high}"
        raise TopologyError(msg)
