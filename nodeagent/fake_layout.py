"""The hardware a :class:`~nodeagent.fake_nvml.FakeNvml` pretends to have, derived from a document.

A document imported from ``nvidia-smi topo -m`` lacks what NVML has: bus ids, UUIDs, which link slot
goes where, and the PCIe level of NVLink pairs (``topo -m`` prints ``NV#`` instead). The layout fills
those gaps deterministically, so the same document always gives the same fake:

* GPU ``i`` sits at bus ``0x10 + 3*i`` of domain 0 and gets a UUID ending in its index, unless the
  document has its own;
* direct NVLinks (bridges, cube-mesh) take the first slots, peer by peer in index order; on an NVSwitch
  node a GPU's ``NV#`` links are spread round-robin over four switches (an H100's 18 links come out as
  5/5/4/4, as in nvidia-smi-less VMs; docs/design/nvlink-topology.md §2.5);
* a GPU has as many slots as its model has NVLinks (the rest are inactive), at least as many as it uses;
* a pair whose PCIe level the document does not know is ``NODE`` when both GPUs have the same known
  locality (NUMA node, else CPU affinity) and ``SYS`` otherwise; such pairs are listed in ``guessed``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from nodeagent.nvml_values import BusKey, parse_bus_id
from scheduling.topology import PcieLevel, TopologyDocument
from scheduling.topology.builders import model_facts

SWITCHES = 4
"""NVSwitch chips an NVSwitch node's links are spread over."""

MAX_LINK_SLOTS = 36
"""``NVML_NVLINK_MAX_LINKS``: a GPU cannot have more link slots."""


@dataclass(frozen=True, slots=True)
class FakeLink:
    """One NVLink slot: the far end's address (``None`` for an inactive slot) and whether it is a switch."""

    remote: BusKey | None
    to_switch: bool = False


@dataclass(frozen=True, slots=True)
class FakeGpu:
    """One GPU as the fake reports it."""

    index: int
    uuid: str
    bus: BusKey
    numa_node: int | None
    cpu_affinity: str | None
    links: tuple[FakeLink, ...]


@dataclass(frozen=True, slots=True)
class FakeNode:
    """Every GPU, the switches, and the PCIe level of every pair ``(a, b)`` with ``a < b``."""

    gpus: tuple[FakeGpu, ...]
    switches: tuple[BusKey, ...]
    levels: Mapping[tuple[int, int], PcieLevel]
    guessed: frozenset[tuple[int, int]]


def layout(document: TopologyDocument | None) -> FakeNode:
    """The fake hardware for ``document``; ``None`` gives a node without GPUs.

    Raises:
        ValueError: a GPU would need more than ``MAX_LINK_SLOTS`` NVLinks.
    """
    if document is None:
        return FakeNode((), (), MappingProxyType({}), frozenset())
    buses = tuple(_bus(document, index) for index in range(document.gpu_count))
    taken = set(buses)
    switches = tuple(
        [key for key in (BusKey(0, 0xE0 + k, 0, 0) for k in range(32)) if key not in taken][:SWITCHES]
    )
    facts = model_facts(document.gpu_model)
    model_slots = facts.nvlinks_per_gpu if facts.nvlink_gen is not None else 0
    gpus = []
    for info in document.gpus:
        active = _active_links(document, info.index, buses, switches)
        if len(active) > MAX_LINK_SLOTS:
            msg = f"GPU{info.index} would need {len(active)} NVLinks; NVML has {MAX_LINK_SLOTS} slots"
            raise ValueError(msg)
        spare = max(model_slots - len(active), 0) if active or model_slots else 0
        gpus.append(
            FakeGpu(
                index=info.index,
                uuid=info.uuid or f"GPU-{info.index:08x}-fa4e-4e00-8000-00000000fa4e",
                bus=buses[info.index],
                numa_node=info.numa_node,
                cpu_affinity=info.cpu_affinity,
                links=(*active, *(FakeLink(None) for _ in range(spare))),
            )
        )
    levels, guessed = _levels(document)
    return FakeNode(tuple(gpus), switches, MappingProxyType(levels), frozenset(guessed))


def _bus(document: TopologyDocument, index: int) -> BusKey:
    text = document.gpus[index].pci_bus_id
    key = parse_bus_id(text) if text is not None else None
    return key or BusKey(0, 0x10 + 3 * index, 0, 0)


def _active_links(
    document: TopologyDocument, index: int, buses: tuple[BusKey, ...], switches: tuple[BusKey, ...]
) -> list[FakeLink]:
    if document.nvswitch:
        count = document.nvlink_count(index)
        return [FakeLink(switches[slot % len(switches)], to_switch=True) for slot in range(count)]
    links: list[FakeLink] = []
    for peer in range(document.gpu_count):
        pair = document.link(index, peer) if peer != index else None
        if pair is not None:
            links.extend(FakeLink(buses[peer]) for _ in range(pair.nvlinks))
    return links


def _levels(document: TopologyDocument) -> tuple[dict[tuple[int, int], PcieLevel], set[tuple[int, int]]]:
    levels: dict[tuple[int, int], PcieLevel] = {}
    guessed: set[tuple[int, int]] = set()
    for a in range(document.gpu_count):
        for b in range(a + 1, document.gpu_count):
            link = document.link(a, b)
            if link is not None and link.pcie is not None:
                levels[(a, b)] = link.pcie
                continue
            here, there = document.gpus[a].locality, document.gpus[b].locality
            levels[(a, b)] = PcieLevel.NODE if here is not None and here == there else PcieLevel.SYS
            guessed.add((a, b))
    return levels, guessed
