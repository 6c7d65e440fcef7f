"""Everything about one node's topology that does not depend on which GPUs are free, computed once.

The scheduler scores the same few topologies over and over (a cluster has few distinct machine types)
with different free GPUs, so :func:`prepare_topology` does the expensive part once per document: the
graph, the max-flow of every GPU pair, and the tables behind two cheap bounds on a set's bandwidth:

* lower bound: the smallest pair bandwidth inside the set (a bigger set only adds paths);
* upper bound: the smallest of a few cuts that split the set: one GPU against the rest, and each PCIe
  subtree (switch, host bridge, socket) against the rest, with the NVSwitch on the better side.

When the bounds meet, which they do for most sets on PCIe, bridged and NVSwitch nodes, the exact value
costs no max-flow; otherwise :func:`~scheduling.topology.graph.set_bandwidth` runs |S|-1 max-flows.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import combinations

import networkx as nx

from scheduling.topology.bandwidth import BandwidthModel
from scheduling.topology.document import TopologyDocument
from scheduling.topology.graph import build_graph, set_bandwidth
from scheduling.topology.pcie_tree import PcieTree, infer_pcie_tree

DEFAULT_BANDWIDTH = BandwidthModel()
"""The bandwidth model used when the caller does not pass one."""


@dataclass(frozen=True, eq=False)
class NodeTopology:
    """A document with its graph and precomputed tables; equal (and hashed) by :attr:`fingerprint`.

    Attributes:
        document: the node's topology document.
        bandwidth: the capacities used.
        fingerprint: the document's JSON plus the bandwidth model: the identity used in caches.
        graph: the flow network (read-only: it is shared by every caller).
        tree: the inferred PCIe tree.
        own_mbs: per GPU, its NVSwitch plus PCIe uplink capacity.
        switch_mbs: per GPU, its NVSwitch capacity (0 without a switch).
        direct_mbs: ``direct_mbs[a][b]``, the direct NVLink capacity of a pair.
        cuts: ``(members mask, uplink MB/s)`` of every PCIe vertex but the root.
        pair_mbs: ``pair_mbs[a][b]``, the bandwidth of the set ``{a, b}``.
        locality: per GPU a CPU-socket group id (equal ids share a NUMA node or CPU affinity).
        distance: ``distance[a][b]``: 0 for NVLink pairs, else the (inferred) PCIe level 1..5.
    """

    document: TopologyDocument
    bandwidth: BandwidthModel
    fingerprint: str
    graph: nx.DiGraph = field(repr=False)
    tree: PcieTree = field(repr=False)
    own_mbs: tuple[int, ...] = field(repr=False)
    switch_mbs: tuple[int, ...] = field(repr=False)
    direct_mbs: tuple[tuple[int, ...], ...] = field(repr=False)
    cuts: tuple[tuple[int, int], ...] = field(repr=False)
    pair_mbs: tuple[tuple[int, ...], ...] = field(repr=False)
    locality: tuple[int, ...] = field(repr=False)
    distance: tuple[tuple[int, ...], ...] = field(repr=False)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, NodeTopology) and other.fingerprint == self.fingerprint

    def __hash__(self) -> int:
        return hash(self.fingerprint)

    @property
    def gpu_count(self) -> int:
        """GPUs on the node."""
        return self.document.gpu_count

    def lower_bound(self, members: Sequence[int]) -> int:
        """The smallest pair bandwidth among ``members`` (0 for fewer than two)."""
        pair = self.pair_mbs
        return min((pair[a][b] for a, b in combinations(members, 2)), default=0)

    def upper_bound(self, members: Sequence[int]) -> int:
        """The smallest of the precomputed cuts that split ``members`` (0 for fewer than two)."""
        if len(members) < 2:
            return 0
        direct, switch = self.direct_mbs, self.switch_mbs
        has_direct = not self.document.nvswitch
        if has_direct:
            best = min(self.own_mbs[a] + sum(direct[a][b] for b in members) for a in members)
        else:
            best = min(self.own_mbs[a] for a in members)
        switch_total = 0 if has_direct else sum(switch[g] for g in members)
        mask = 0
        for gpu in members:
            mask |= 1 << gpu
        for cut_mask, capacity in self.cuts:
            inside = cut_mask & mask
            if not inside or inside == mask or capacity >= best:
                continue
            value = capacity
            if has_direct:
                ins = [a for a in members if inside >> a & 1]
                value += sum(direct[a][b] for a in ins for b in members if not inside >> b & 1)
            else:
                switch_inside = sum(switch[g] for g in members if inside >> g & 1)
                value += min(switch_inside, switch_total - switch_inside)
            best = min(best, value)
        return best

    def set_mbs(self, members: Sequence[int]) -> int:
        """The exact bandwidth of ``members`` (sorted GPU indices), in MB/s per direction."""
        low, high = self.lower_bound(members), self.upper_bound(members)
        if low >= high:
            return high
        return set_bandwidth(self.graph, members, floor=low)


def prepare_topology(
    document: TopologyDocument, bandwidth: BandwidthModel = DEFAULT_BANDWIDTH
) -> NodeTopology:
    """Build the graph of ``document`` and precompute its tables (n(n-1)/2 max-flows).

    >>> from scheduling.topology.builders import uniform
    >>> node = prepare_topology(uniform(4, "NODE", gpu_model="NVIDIA L40S"))
    >>> node.set_mbs((0, 1, 2)), node.pair_mbs[0][3]
    (24000, 24000)
    """
    count = document.gpu_count
    tree = infer_pcie_tree(document)
    graph = build_graph(document, bandwidth, tree)
    pcie = bandwidth.pcie_mbs(document)
    per_link = bandwidth.nvlink_mbs(document)
    switch = tuple(document.nvlink_count(g) * per_link if document.nvswitch else 0 for g in range(count))
    uplink = tuple(pcie if parent is not None else 0 for parent in tree.gpu_parent)
    direct = [[0] * count for _ in range(count)]
    if not document.nvswitch:
        for link in document.links:
            direct[link.a][link.b] = direct[link.b][link.a] = link.nvlinks * per_link
    cuts = []
    for cluster in tree.clusters:
        if cluster.parent is not None:
            crosses_cpus = tree.clusters[cluster.parent].level.name == "SYS"
            cuts.append((cluster.members, bandwidth.inter_socket if crosses_cpus else pcie))
    pair = [[0] * count for _ in range(count)]
    for a, b in combinations(range(count), 2):
        pair[a][b] = pair[b][a] = set_bandwidth(graph, (a, b))
    groups: dict[object, int] = {}
    locality = []
    for gpu in document.gpus:
        key = gpu.locality if gpu.locality is not None else ("unknown", gpu.index)
        locality.append(groups.setdefault(key, len(groups)))
    distance = tuple(
        tuple(0 if a == b or _nvlinked(document, a, b) else tree.levels[a][b] for b in range(count))
        for a in range(count)
    )
    return NodeTopology(
        document=document,
        bandwidth=bandwidth,
        fingerprint=f"{document.to_json()}|{bandwidth!r}",
        graph=graph,
        tree=tree,
        own_mbs=tuple(s + u for s, u in zip(switch, uplink, strict=True)),
        switch_mbs=switch,
        direct_mbs=tuple(tuple(row) for row in direct),
        cuts=tuple(cuts),
        pair_mbs=tuple(tuple(row) for row in pair),
        locality=tuple(locality),
        distance=distance,
    )


def _nvlinked(document: TopologyDocument, a: int, b: int) -> bool:
    if document.nvswitch:
        return document.nvlink_count(a) > 0 and document.nvlink_count(b) > 0
    link = document.link(a, b)
    return link is not None and link.nvlinks > 0
