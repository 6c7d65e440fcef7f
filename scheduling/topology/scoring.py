"""Choose the best set of k free GPUs on a node, and score the node for kube-scheduler's prioritize.

The score of a set is the bandwidth it sustains (:mod:`scheduling.topology.graph`;
docs/design/nvlink-topology.md §5.1 item 2). Among sets of equal bandwidth the tie-breaks of §5.1
item 3 apply, in this order:

1. fewer CPU sockets (NUMA nodes, else CPU-affinity groups; a GPU of unknown locality counts alone);
2. less fragmentation: the smallest total pair bandwidth between the chosen GPUs and the GPUs left
   free, so a request takes GPUs that are poorly tied to the rest and leaves the best islands (bridge
   pairs, NVLink quads, sockets) whole; for one GPU this is HAMi's "worst-connected GPU" rule (§3.2);
3. more pair bandwidth inside the set, then closer PCIe levels (the go-gpuallocator-style sum, §5.1 3d);
4. the lowest GPU indices, so equal inputs always give the same answer.

Search (:mod:`scheduling.topology.search`): exact, by a best-first walk over every k-subset ranked by a
cheap bound, whenever the free GPUs hold at most C(16, 8) subsets, so the result is the same as scoring
all of them; a bounded greedy search with a stated guarantee above that. Results are memoised in a
caller-owned :class:`TopologyCache` keyed by (topology, free GPUs, k).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from scheduling.topology.bandwidth import BandwidthModel
from scheduling.topology.document import TopologyDocument
from scheduling.topology.lru import BoundedCache
from scheduling.topology.node import DEFAULT_BANDWIDTH, NodeTopology, prepare_topology
from scheduling.topology.search import search
from scheduling.topology.topology_error import TopologyError

MAX_NODE_SCORE = 10
"""kube-scheduler's ``MaxExtenderPriority``."""


@dataclass(frozen=True, slots=True)
class GpuSetChoice:
    """The GPUs chosen for a request and why.

    Attributes:
        gpus: the chosen GPU indices, ascending.
        score: the bandwidth the set sustains, MB/s per direction (0 for one GPU: nothing to share).
        best_possible: the best ``score`` any k GPUs of this node reach when all are free.
        numa_groups: how many CPU-socket groups the set spans.
        fragmentation: total pair bandwidth (MB/s) between the chosen GPUs and the GPUs left free.
    """

    gpus: tuple[int, ...]
    score: int
    best_possible: int
    numa_groups: int
    fragmentation: int


class TopologyCache:
    """Caller-owned memory for topology scoring; every part is bounded (least recently used goes first).

    Keep one per process (it is thread-safe) and pass it to every call; nothing is cached without it.

    Args:
        max_topologies: prepared topologies kept by :meth:`topology`.
        max_choices: :func:`best_gpu_set` results kept, keyed by (topology, free GPUs, k).
        max_set_scores: exact set bandwidths kept, keyed by (topology, GPU set).
    """

    def __init__(
        self, *, max_topologies: int = 256, max_choices: int = 65_536, max_set_scores: int = 262_144
    ) -> None:
        self.topologies: BoundedCache[tuple[TopologyDocument, BandwidthModel], NodeTopology]
        self.topologies = BoundedCache(max_topologies)
        self.choices: BoundedCache[tuple[str, frozenset[int], int], GpuSetChoice] = BoundedCache(max_choices)
        self.set_scores: BoundedCache[tuple[str, tuple[int, ...]], int] = BoundedCache(max_set_scores)

    def topology(
        self, document: TopologyDocument, bandwidth: BandwidthModel = DEFAULT_BANDWIDTH
    ) -> NodeTopology:
        """The prepared topology of ``document``, built on first use.

        Hashing a document costs a little; keep the returned object with the node (rebuilding it only
        when the annotation changes) rather than calling this per request.
        """
        key = (document, bandwidth)
        found = self.topologies.get(key)
        if found is None:
            found = prepare_topology(document, bandwidth)
            self.topologies.put(key, found)
        return found

    def clear(self) -> None:
        """Forget everything."""
        self.topologies.clear()
        self.choices.clear()
        self.set_scores.clear()


def set_score(topology: NodeTopology, gpus: Iterable[int], *, cache: TopologyCache | None = None) -> int:
    """The bandwidth (MB/s per direction) the GPUs ``gpus`` sustain together; 0 for fewer than two.

    >>> from scheduling.topology.builders import uniform
    >>> set_score(prepare_topology(uniform(8, "NV12", gpu_model="NVIDIA A100-SXM4-40GB")), [0, 1])
    250000
    """
    members = tuple(sorted(set(gpus)))
    _check_gpus(topology, members)
    return _set_mbs(topology, members, cache)


def best_gpu_set(
    topology: NodeTopology, free: frozenset[int], k: int, *, cache: TopologyCache | None = None
) -> GpuSetChoice | None:
    """The best ``k`` GPUs among ``free``, or ``None`` when fewer than ``k`` are free.

    "Best" is the order in the module docstring: bandwidth, then the tie-breaks.

    The answer is exact for every request on nodes of up to 16 GPUs, and comes from a bounded search
    with a stated guarantee above that (:mod:`scheduling.topology.search`): no GPU count fails.

    Raises:
        TopologyError: ``k`` is below 1, or ``free`` names a GPU the node lacks.

    >>> from scheduling.topology.builders import uniform
    >>> node = prepare_topology(uniform(8, "NV12", gpu_model="NVIDIA A100-SXM4-40GB"))
    >>> best_gpu_set(node, frozenset({1, 3, 5, 6}), 2)
    GpuSetChoice(gpus=(1, 3), score=250000, best_possible=250000, numa_groups=2, fragmentation=1000000)
    """
    key = (topology.fingerprint, free, k)
    if cache is not None:
        found = cache.choices.get(key)
        if found is not None:
            return found
    if k < 1:
        msg = f"a GPU set needs at least one GPU, got k={k}"
        raise TopologyError(msg)
    ordered = tuple(sorted(free))
    _check_gpus(topology, ordered)
    if len(ordered) < k:
        return None
    gpus, score, groups, fragmentation = search(topology, ordered, k, lambda s: _set_mbs(topology, s, cache))
    everything = frozenset(range(topology.gpu_count))
    if free == everything:
        best_possible = score
    else:
        best = best_gpu_set(topology, everything, k, cache=cache)
        best_possible = best.score if best is not None else score
    choice = GpuSetChoice(gpus, score, max(best_possible, score), groups, fragmentation)
    if cache is not None:
        cache.choices.put(key, choice)
    return choice


def node_topology_score(
    topology: NodeTopology, free: frozenset[int], k: int, *, cache: TopologyCache | None = None
) -> int:
    """0..10: the best free set's bandwidth relative to the best any k GPUs of this node reach.

    10 means the free GPUs include a best-possible set (always so for k = 1); a node that cannot fit k
    GPUs scores 0. The ratio is rounded down, so only a best-possible set earns 10.

    >>> from scheduling.topology.builders import uniform
    >>> node = prepare_topology(uniform(8, "SYS"))
    >>> node_topology_score(node, frozenset({0, 1}), 2), node_topology_score(node, frozenset({0}), 2)
    (10, 0)
    """
    choice = best_gpu_set(topology, free, k, cache=cache)
    if choice is None:
        return 0
    if choice.best_possible <= 0:
        return MAX_NODE_SCORE
    return MAX_NODE_SCORE * choice.score // choice.best_possible


def _set_mbs(topology: NodeTopology, members: tuple[int, ...], cache: TopologyCache | None) -> int:
    if cache is None:
        return topology.set_mbs(members)
    key = (topology.fingerprint, members)
    found = cache.set_scores.get(key)
    if found is None:
        found = topology.set_mbs(members)
        cache.set_scores.put(key, found)
    return found


def _check_gpus(topology: NodeTopology, ordered: tuple[int, ...]) -> None:
    if ordered and (ordered[0] < 0 or ordered[-1] >= topology.gpu_count):
        msg = f"GPUs {list(ordered)} are not all on this node (GPU0..GPU{topology.gpu_count - 1})"
        raise TopologyError(msg)
