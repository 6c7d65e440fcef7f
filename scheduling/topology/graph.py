"""The flow network of one node and the bandwidth a set of its GPUs can sustain.

This is the model docs/design/nvlink-topology.md §5.1 recommends: GPU vertices; direct NVLink edges with
capacity links x per-link rate; on NVSwitch nodes one switch vertex that every GPU reaches with its link count
(all switch chips of a baseboard merged into one non-blocking vertex, §2.5); the PCIe tree of
:mod:`scheduling.topology.pcie_tree` with x16 PCIe capacity on GPU and switch uplinks and the CPU
interconnect on socket uplinks. Capacities come from :class:`BandwidthModel` (MB/s per direction), and
each capacity is on both directions of a link.

The bandwidth of a GPU set S is the minimum s-t max-flow over members s, t in the graph without the
GPUs outside S (NCCL does not relay through GPUs outside the communicator, §5.1 item 2). It equals the
smallest cut that splits S, an upper bound on ring all-reduce bus bandwidth, and it needs only |S|-1
max-flows: every cut that splits S separates one fixed member from some other member.
"""

from __future__ import annotations

from collections.abc import Sequence

import networkx as nx
from networkx.algorithms.flow import edmonds_karp

from scheduling.topology.bandwidth import BandwidthModel
from scheduling.topology.document import TopologyDocument
from scheduling.topology.links import PcieLevel
from scheduling.topology.pcie_tree import PcieTree, infer_pcie_tree

SWITCH = "nvswitch"
"""The vertex name of the NVSwitch fabric."""


def gpu_vertex(index: int) -> str:
    """The vertex name of GPU ``index`` (``gpu0``, ``gpu1``...)."""
    return f"gpu{index}"


def build_graph(doc: TopologyDocument, bandwidth: BandwidthModel, tree: PcieTree | None = None) -> nx.DiGraph:
    """Build the capacitated graph of ``doc``.

    Vertices carry ``kind`` (``gpu``, ``pcie``, ``nvswitch``); GPU vertices carry ``index`` and PCIe
    vertices ``level`` and ``members`` (bit mask). Edges carry an integer ``capacity`` in MB/s and a
    ``kind`` (``nvlink``, ``nvswitch``, ``pcie``, ``cpu``).

    >>> from scheduling.topology.builders import uniform
    >>> g = build_graph(uniform(2, "NV4", gpu_model="NVIDIA RTX A6000"), BandwidthModel())
    >>> g.edges["gpu0", "gpu1"]["capacity"], g.edges["gpu0", "pcie0"]["capacity"]
    (48000, 24000)
    """
    tree = tree if tree is not None else infer_pcie_tree(doc)
    per_link = bandwidth.nvlink_mbs(doc)
    pcie = bandwidth.pcie_mbs(doc)
    graph = nx.DiGraph()
    for gpu in doc.gpus:
        graph.add_node(gpu_vertex(gpu.index), kind="gpu", index=gpu.index)
    for number, cluster in enumerate(tree.clusters):
        graph.add_node(f"pcie{number}", kind="pcie", level=cluster.level.name, members=cluster.members)
    for index, parent in enumerate(tree.gpu_parent):
        if parent is not None:
            _connect(graph, gpu_vertex(index), f"pcie{parent}", pcie, "pcie")
    for number, cluster in enumerate(tree.clusters):
        if cluster.parent is not None:
            crosses_cpus = tree.clusters[cluster.parent].level is PcieLevel.SYS
            capacity = bandwidth.inter_socket if crosses_cpus else pcie
            kind = "cpu" if crosses_cpus else "pcie"
            _connect(graph, f"pcie{number}", f"pcie{cluster.parent}", capacity, kind)
    if doc.nvswitch:
        graph.add_node(SWITCH, kind="nvswitch")
        for gpu in doc.gpus:
            links = doc.nvlink_count(gpu.index)
            if links:
                _connect(graph, gpu_vertex(gpu.index), SWITCH, links * per_link, "nvswitch")
    else:
        for link in doc.links:
            if link.nvlinks:
                _connect(graph, gpu_vertex(link.a), gpu_vertex(link.b), link.nvlinks * per_link, "nvlink")
    return graph


def set_bandwidth(graph: nx.DiGraph, members: Sequence[int], *, floor: int = 0) -> int:
    """The bandwidth GPUs ``members`` sustain together: their smallest pairwise max-flow, in MB/s.

    GPUs outside ``members`` are removed first. A set of fewer than two GPUs needs no interconnect and
    scores 0.

    Args:
        graph: a graph from :func:`build_graph`.
        members: the GPU indices of the set.
        floor: a value the result is known not to go below; the search stops once it reaches it.
    """
    if len(members) < 2:
        return 0
    chosen = set(members)
    keep = [v for v, data in graph.nodes(data=True) if data["kind"] != "gpu" or data["index"] in chosen]
    view = graph.subgraph(keep)
    source = gpu_vertex(members[0])
    best: int | None = None
    for other in members[1:]:
        value = int(nx.maximum_flow_value(view, source, gpu_vertex(other), flow_func=edmonds_karp))
        best = value if best is None else min(best, value)
        if best <= floor:
            break
    return best if best is not None else 0


def _connect(graph: nx.DiGraph, u: str, v: str, capacity: int, kind: str) -> None:
    graph.add_edge(u, v, capacity=capacity, kind=kind)
    graph.add_edge(v, u, capacity=capacity, kind=kind)
