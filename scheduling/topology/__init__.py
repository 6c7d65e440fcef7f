"""GPU topology inside one node: the annotation document, its importers, and bandwidth-based GPU choice.

Pipeline: a :class:`TopologyDocument` (from the node agent's annotation via :func:`from_json`, from
``nvidia-smi`` text via :func:`parse_topo_matrix` / :func:`apply_nvlink_status`, or :func:`uniform`)
→ :func:`prepare_topology` (graph + per-pair max-flows, once per distinct document) →
:func:`best_gpu_set` / :func:`node_topology_score` per request, memoised in a caller-owned
:class:`TopologyCache`. The model is docs/design/nvlink-topology.md §5.1; capacities are NCCL's (§4.2).
"""

from scheduling.topology.bandwidth import BandwidthModel
from scheduling.topology.builders import infer_nvswitch, uniform
from scheduling.topology.document import FORMAT_VERSION, TOPOLOGY_ANNOTATION, TopologyDocument, from_json
from scheduling.topology.gpu_info import GpuInfo
from scheduling.topology.links import GpuLink, PcieLevel, parse_link
from scheduling.topology.node import NodeTopology, prepare_topology
from scheduling.topology.scoring import (
    MAX_NODE_SCORE,
    GpuSetChoice,
    TopologyCache,
    best_gpu_set,
    node_topology_score,
    set_score,
)
from scheduling.topology.smi_import import apply_nvlink_status, parse_nvlink_status, parse_topo_matrix
from scheduling.topology.topology_error import TopologyError

__all__ = [
    "FORMAT_VERSION",
    "MAX_NODE_SCORE",
    "TOPOLOGY_ANNOTATION",
    "BandwidthModel",
    "GpuInfo",
    "GpuLink",
    "GpuSetChoice",
    "NodeTopology",
    "PcieLevel",
    "TopologyCache",
    "TopologyDocument",
    "TopologyError",
    "apply_nvlink_status",
    "best_gpu_set",
    "from_json",
    "infer_nvswitch",
    "node_topology_score",
    "parse_link",
    "parse_nvlink_status",
    "parse_topo_matrix",
    "prepare_topology",
    "set_score",
    "uniform",
]
