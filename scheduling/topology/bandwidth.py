"""Link capacities, in integer MB/s per direction, that turn a topology document into a flow network.

The numbers are NCCL's own effective constants (NVIDIA/nccl ``src/graph/topo.h``, quoted in
docs/design/nvlink-topology.md §4.2), as that document's recommended model asks (§0, §5.1): a score in these
units reads like the bus bandwidth ``nccl-tests`` reports (§4.5) and is comparable across link kinds. They are
about 75-85 % of the nominal rates (§4.1, §4.3); an HGX H100 pair measured 371-377 GB/s one way against
the 18 x 20.6 = 370.8 GB/s modelled here (§4.4). Integers keep max-flow exact and scores comparable.
"""

from __future__ import annotations

from dataclasses import dataclass

from scheduling.topology.document import TopologyDocument

NCCL_NVLINK_MBS: tuple[tuple[int, int], ...] = (
    (60, 18_000),
    (70, 20_000),
    (80, 20_000),
    (86, 12_000),
    (90, 20_600),
    (100, 40_100),
)
"""NCCL's ``ncclTopoNVLinkBw`` per link, keyed by compute capability x 10 (SM60 ... SM100)."""

NCCL_PCIE_X16_MBS: tuple[tuple[int, int], ...] = ((3, 12_000), (4, 24_000), (5, 48_000), (6, 96_000))
"""NCCL's PCIe formula ``width * speed / 80`` for x16 links, by PCIe generation."""


@dataclass(frozen=True, slots=True)
class BandwidthModel:
    """The capacities the graph uses. The defaults follow docs/design/nvlink-topology.md §4.2.

    Attributes:
        nvlink_by_cc: per-link NVLink MB/s keyed by compute capability x 10.
        nvlink_default: per-link MB/s when neither the architecture nor a measured rate is known
            (NCCL's SM70/SM80 value).
        nominal_percent: the share of a measured nominal rate (``nvlink -s``) used when the architecture
            is not in ``nvlink_by_cc``; NCCL's constants are 80-85 % of nominal (§4.1 vs §4.2).
        pcie_by_gen: MB/s of an x16 PCIe link keyed by generation.
        pcie_default_gen: the generation assumed when the document has none (NCCL's ``PCI_BW``: Gen3).
        inter_socket: MB/s across the CPU interconnect (NCCL's ``SKL_QPI_BW``, 10 GB/s; AMD Zen3/4 is 24,
            Sapphire Rapids 22: raise it for such fleets).
    """

    nvlink_by_cc: tuple[tuple[int, int], ...] = NCCL_NVLINK_MBS
    nvlink_default: int = 20_000
    nominal_percent: int = 80
    pcie_by_gen: tuple[tuple[int, int], ...] = NCCL_PCIE_X16_MBS
    pcie_default_gen: int = 3
    inter_socket: int = 10_000

    def nvlink_mbs(self, doc: TopologyDocument) -> int:
        """Effective MB/s of one NVLink of this node, per direction.

        >>> from scheduling.topology.builders import uniform
        >>> BandwidthModel().nvlink_mbs(uniform(8, "NV18", gpu_model="NVIDIA H100 80GB HBM3"))
        20600
        """
        by_cc = dict(self.nvlink_by_cc)
        if doc.compute_capability in by_cc:
            return by_cc[doc.compute_capability]
        if doc.nvlink_link_mbs is not None:
            return doc.nvlink_link_mbs * self.nominal_percent // 100
        return self.nvlink_default

    def pcie_mbs(self, doc: TopologyDocument) -> int:
        """Effective MB/s of one GPU's x16 PCIe link (and of each PCIe switch uplink), per direction."""
        by_gen = dict(self.pcie_by_gen)
        return by_gen.get(doc.pcie_gen or self.pcie_default_gen, by_gen[self.pcie_default_gen])
