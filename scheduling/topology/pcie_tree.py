"""Recover each node's PCIe tree from pairwise common-ancestor levels.

PCIe levels nest (PIX ⊂ PXB ⊂ PHB ⊂ NODE ⊂ SYS form an ultrametric, docs/design/nvlink-topology.md §5.1), so
the GPUs that are within level L of each other form clusters, and the clusters at successive levels form a
tree: PCIe switches, host bridges, CPU sockets. ``topo -m`` hides the PCIe level of NVLink pairs
(§1), so missing levels are filled from what else is known: GPUs with the same NUMA node (or CPU
affinity) are at most ``NODE`` apart, GPUs with different ones are ``SYS`` apart, and single linkage
through the known pairs then bounds the rest (an ultrametric never exceeds the largest step of a path).
A pair with no evidence at all is taken as ``SYS``, the cautious guess.
"""

from __future__ import annotations

from dataclasses import dataclass

from scheduling.topology.document import TopologyDocument
from scheduling.topology.links import PcieLevel

_CLUSTER_LEVELS = (PcieLevel.PIX, PcieLevel.PXB, PcieLevel.PHB, PcieLevel.NODE)


@dataclass(frozen=True, slots=True)
class PcieCluster:
    """One inner vertex of the PCIe tree: a switch, a host bridge, a socket or the whole system.

    Attributes:
        members: bit mask of the GPUs below this vertex (bit i = GPU i).
        level: the level at which these GPUs meet (``SYS`` only for the root joining several sockets).
        parent: index of the parent in :attr:`PcieTree.clusters`, ``None`` for the root.
    """

    members: int
    level: PcieLevel
    parent: int | None


@dataclass(frozen=True, slots=True)
class PcieTree:
    """The inferred PCIe tree of one node.

    Attributes:
        levels: ``levels[a][b]`` is the (inferred) PCIe level of GPUs a and b, 0 on the diagonal.
        clusters: the inner vertices, children before parents.
        gpu_parent: for each GPU the index of its lowest cluster (``None`` only on a one-GPU node).
    """

    levels: tuple[tuple[int, ...], ...]
    clusters: tuple[PcieCluster, ...]
    gpu_parent: tuple[int | None, ...]


def infer_pcie_tree(doc: TopologyDocument) -> PcieTree:
    """Build the PCIe tree of ``doc`` (see the module docstring for how gaps are filled).

    >>> from scheduling.topology.builders import uniform
    >>> tree = infer_pcie_tree(uniform(4, "SYS"))
    >>> [(bin(c.members), c.level.name) for c in tree.clusters][-1]
    ('0b1111', 'SYS')
    """
    count = doc.gpu_count
    evidence = _evidence(doc)
    merged_at = [[0 if a == b else int(PcieLevel.SYS) for b in range(count)] for a in range(count)]
    components_by_level = []
    for level in _CLUSTER_LEVELS:
        components = _components(count, [(a, b) for (a, b), lvl in evidence.items() if lvl <= level])
        for mask in components:
            members = _bits(mask)
            for a in members:
                for b in members:
                    if a != b and merged_at[a][b] > level:
                        merged_at[a][b] = int(level)
        components_by_level.append((level, components))
    several_sockets = len(components_by_level[-1][1]) > 1
    clusters: list[list[int]] = []  # [members, level, parent]
    lowest: list[int | None] = [None] * count
    for level, components in components_by_level:
        for mask in components:
            size = bin(mask).count("1")
            if size < 2 and not (level is PcieLevel.NODE and several_sockets):
                continue
            below = lowest[(mask & -mask).bit_length() - 1]
            while below is not None and clusters[below][2] >= 0:
                below = clusters[below][2]
            if below is not None and clusters[below][0] == mask:
                continue  # the same GPUs already meet at a lower level
            clusters.append([mask, int(level), -1])
            _adopt(clusters, lowest, mask, len(clusters) - 1)
    if several_sockets:
        clusters.append([(1 << count) - 1, int(PcieLevel.SYS), -1])
        _adopt(clusters, lowest, (1 << count) - 1, len(clusters) - 1)
    return PcieTree(
        levels=tuple(tuple(row) for row in merged_at),
        clusters=tuple(PcieCluster(m, PcieLevel(lv), None if p < 0 else p) for m, lv, p in clusters),
        gpu_parent=tuple(_first_cluster(clusters, gpu) for gpu in range(count)),
    )


def _evidence(doc: TopologyDocument) -> dict[tuple[int, int], int]:
    """Known or bounded PCIe levels per pair; pairs with no evidence are absent."""
    evidence: dict[tuple[int, int], int] = {}
    places = [gpu.locality for gpu in doc.gpus]
    for a in range(doc.gpu_count):
        for b in range(a + 1, doc.gpu_count):
            link = doc.link(a, b)
            if link is not None and link.pcie is not None:
                evidence[a, b] = int(link.pcie)
            elif places[a] is not None and places[b] is not None:
                evidence[a, b] = int(PcieLevel.NODE if places[a] == places[b] else PcieLevel.SYS)
    return evidence


def _components(count: int, pairs: list[tuple[int, int]]) -> list[int]:
    """Connected components as bit masks, ordered by their lowest GPU."""
    root = list(range(count))

    def find(x: int) -> int:
        while root[x] != x:
            root[x] = root[root[x]]
            x = root[x]
        return x

    for a, b in pairs:
        ra, rb = find(a), find(b)
        if ra != rb:
            root[max(ra, rb)] = min(ra, rb)
    masks: dict[int, int] = {}
    for gpu in range(count):
        masks[find(gpu)] = masks.get(find(gpu), 0) | (1 << gpu)
    return [masks[key] for key in sorted(masks)]


def _adopt(clusters: list[list[int]], lowest: list[int | None], mask: int, new: int) -> None:
    """Make cluster ``new`` (members ``mask``) the parent of the current tops below it."""
    for gpu in _bits(mask):
        top = lowest[gpu]
        if top is None:
            lowest[gpu] = new
            continue
        while top != new and clusters[top][2] >= 0:
            top = clusters[top][2]
        if top != new:
            clusters[top][2] = new


def _first_cluster(clusters: list[list[int]], gpu: int) -> int | None:
    for index, (members, _, _) in enumerate(clusters):
        if members >> gpu & 1:
            return index
    return None


def _bits(mask: int) -> list[int]:
    return [i for i in range(mask.bit_length()) if mask >> i & 1]
