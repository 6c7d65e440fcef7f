"""A cluster description file: node groups, each with its GPUs and the ``nvidia-smi topo -m`` of its nodes.

The Philly and Pollux clusters of ``simulator.simulated_cluster`` are alike nodes without a GPU topology,
which is right for PCIe-only T4s and says nothing about NVLink. A description names what the nodes are, so
that the core sees each node as the product does: the node agent (or an operator importing ``topo -m``
text) writes the document into the node annotation ``phalanx.io/gpu-topology``, and the core reads
that annotation (``kubeio.convert.node_topology``: ``from_json``, then the shared ``TopologyCache``).
Here the ``topo -m`` text is imported with ``scheduling.topology.parse_topo_matrix``, written to the
annotation's JSON and read back with ``from_json``, so a simulated node holds exactly what a real one
whose annotation came from the same text would hold.

The file is TOML (hand-written, comments allowed)::

    rack_size = 8                 # nodes per rack label, in node order (0: no racks)
    network_mbs = 12000           # MB/s per direction between nodes (NCCL's NET_BW for 100 Gb/s)

    [[group]]
    name = "a6000"
    count = 4                     # leave out in one group: the nodes the workload's cluster needs
    gpus = 8                      # optional with a topology (its GPU count); must match it
    topology = "topologies/rtx-a6000-8gpu-nvlink-bridge-pairs_unige-baobab-gpu048.txt"
    gpu_model = "NVIDIA RTX A6000"   # ``topo -m`` does not print it; it sets the NVLink rate

Paths are relative to the file. Nodes are numbered group after group, in file order.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path

import msgspec

from scheduling.topology import (
    NodeTopology,
    TopologyCache,
    TopologyDocument,
    TopologyError,
    from_json,
    parse_topo_matrix,
)

DEFAULT_NETWORK_MBS = 12_000
"""NCCL's ``NET_BW`` (12 GB/s per direction, one 100 Gb/s NIC; docs/design/nvlink-topology.md §4.2)."""


class ClusterSpecError(ValueError):
    """A description file that cannot be used, with the file and the field at fault."""

    def __init__(self, path: Path, where: str, problem: str) -> None:
        self.path = path
        self.where = where
        self.problem = problem
        super().__init__(f"{path}: {where}: {problem}")


class GroupSpec(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One ``[[group]]`` table as written."""

    name: str
    count: int | None = None
    gpus: int | None = None
    topology: str | None = None
    gpu_model: str | None = None


class FileSpec(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The whole file as written."""

    group: list[GroupSpec]
    rack_size: int = 0
    network_mbs: int = DEFAULT_NETWORK_MBS


@dataclass(frozen=True, slots=True)
class NodeGroup:
    """One group, its topology imported.

    Attributes:
        name: the group's name.
        count: its nodes, or ``None`` for "the rest of what the workload needs".
        gpus: GPUs per node.
        annotation: the ``phalanx.io/gpu-topology`` value its nodes carry (``None``: no topology).
        document: the annotation read back, as the core reads it.
        source: the ``topo -m`` file it came from.
    """

    name: str
    count: int | None
    gpus: int
    annotation: str | None = None
    document: TopologyDocument | None = None
    source: str | None = None


@dataclass(frozen=True, slots=True)
class ClusterSpec:
    """A read description: groups in file order, racks, and the network between nodes."""

    path: Path
    groups: tuple[NodeGroup, ...]
    rack_size: int = 0
    network_mbs: int = DEFAULT_NETWORK_MBS

    @property
    def gpus_per_node(self) -> int:
        """The GPUs of every node (the loop's ``Mode`` has one count; ``read_cluster`` checks it)."""
        return self.groups[0].gpus

    def node_count(self, needed: int) -> int:
        """Nodes in the cluster; a group without a count fills up to ``needed`` (at least one node)."""
        fixed = sum(g.count or 0 for g in self.groups)
        if all(g.count is not None for g in self.groups):
            return fixed
        return fixed + max(1, needed - fixed)

    def documents(self, needed: int) -> tuple[TopologyDocument | None, ...]:
        """Each node's topology document, in node order (``needed`` as in :meth:`node_count`)."""
        fixed = sum(g.count or 0 for g in self.groups)
        rest = max(1, needed - fixed)
        out: list[TopologyDocument | None] = []
        for group in self.groups:
            out += [group.document] * (group.count if group.count is not None else rest)
        return tuple(out)

    def topologies(self, needed: int, cache: TopologyCache) -> tuple[NodeTopology | None, ...]:
        """Each node's prepared topology, as the core holds it on ``Node.topology``."""
        return tuple(None if d is None else cache.topology(d) for d in self.documents(needed))


def read_cluster(path: Path) -> ClusterSpec:
    """Read a description file (format in the module docstring).

    Raises:
        ClusterSpecError: bad TOML (with its line), an unknown or mistyped field, no group, two groups
            without a count, a count or GPU count below one, a topology file that is missing or not a
            ``topo -m`` matrix, GPUs that disagree with the topology, or groups of different GPU counts.
    """
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ClusterSpecError(path, "TOML", str(exc)) from None
    except OSError as exc:
        raise ClusterSpecError(path, "file", exc.strerror or str(exc)) from None
    try:
        spec = msgspec.convert(raw, FileSpec)
    except msgspec.ValidationError as exc:
        raise ClusterSpecError(path, "field", str(exc)) from None
    if not spec.group:
        raise ClusterSpecError(path, "group", "at least one [[group]] is needed")
    if spec.rack_size < 0:
        raise ClusterSpecError(path, "rack_size", f"must be 0 or more, got {spec.rack_size}")
    if spec.network_mbs < 1:
        raise ClusterSpecError(path, "network_mbs", f"must be positive, got {spec.network_mbs}")
    open_ended = [g.name for g in spec.group if g.count is None]
    if len(open_ended) > 1:
        raise ClusterSpecError(path, "group.count", f"only one group may leave it out: {open_ended}")
    groups = tuple(_group(path, i, g) for i, g in enumerate(spec.group))
    counts = sorted({g.gpus for g in groups})
    if len(counts) > 1:
        raise ClusterSpecError(
            path, "group.gpus", f"every group needs the same GPUs per node (the loop has one count): {counts}"
        )
    return ClusterSpec(path, groups, spec.rack_size, spec.network_mbs)


def _group(path: Path, index: int, group: GroupSpec) -> NodeGroup:
    where = f"group[{index}] ({group.name})"
    if group.count is not None and group.count < 1:
        raise ClusterSpecError(path, f"{where}.count", f"must be at least 1, got {group.count}")
    if group.gpus is not None and group.gpus < 1:
        raise ClusterSpecError(path, f"{where}.gpus", f"must be at least 1, got {group.gpus}")
    if group.topology is None:
        if group.gpus is None:
            raise ClusterSpecError(path, f"{where}.gpus", "needed when the group has no topology")
        return NodeGroup(group.name, group.count, group.gpus)
    source = path.parent / group.topology
    try:
        text = source.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise ClusterSpecError(path, f"{where}.topology", f"{source}: {exc.strerror or exc}") from None
    try:
        annotation = parse_topo_matrix(text, gpu_model=group.gpu_model).to_json()
        document = from_json(annotation)
    except TopologyError as exc:
        raise ClusterSpecError(path, f"{where}.topology", f"{source}: {exc}") from None
    if not document.complete:
        raise ClusterSpecError(
            path, f"{where}.topology", f"{source}: the matrix leaves GPU pairs unknown (a partial copy)"
        )
    gpus = group.gpus if group.gpus is not None else document.gpu_count
    if gpus != document.gpu_count:
        raise ClusterSpecError(
            path, f"{where}.gpus", f"{gpus} GPUs but {group.topology} describes {document.gpu_count}"
        )
    return NodeGroup(group.name, group.count, gpus, annotation, document, group.topology)
