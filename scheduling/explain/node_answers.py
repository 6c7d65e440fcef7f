"""Every node's answer for one pod, grouped: what kube-scheduler filters out, what phalanx turns down.

A pod reaches phalanx's ``filter`` only with the nodes kube-scheduler's in-tree filters kept
(``scheduling.nodes.constraints``), so a node's reason is the first of, in the order they run:

1. its health (``scheduling.nodes.readiness``: not Ready, cordoned), which both turn down;
2. kube-scheduler's own filters: an untolerated taint, the node selector, required node affinity, too
   little free CPU, memory or GPUs by count (when no node passes them, kube-scheduler does not ask
   phalanx at all);
3. phalanx's GPU fit (``scheduling.gpu.fit.filter_nodes``, the filter's own function) for the pod, or for
   a gang its largest waiting member: free GPUs by index, unreadable topology, reserved.

Nodes with the same sentence form one group, so a user reads "5 nodes with too few free GPUs (3 free,
pod needs 4)" once, not five times: the same folding kube-scheduler applies to its event.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType

from scheduling.cluster.promises import PromiseBook
from scheduling.cluster.snapshot import ClusterSnapshot
from scheduling.explain.explanation import NodeGroup
from scheduling.gpu.fit import filter_nodes
from scheduling.model import Pod
from scheduling.nodes.constraints import room_rejection, scheduler_rejection
from scheduling.nodes.readiness import node_rejection
from scheduling.reasons import Reason, Rejection

FITS = "fits"
"""The kind of the group of nodes that have room for the pod now."""

PLACEMENT_KINDS = frozenset({Reason.TAINT, Reason.NODE_SELECTOR, Reason.NODE_AFFINITY})
"""Reasons that waiting never changes: the pod's spec or the node's taints must."""

ROOM_KINDS = frozenset({Reason.INSUFFICIENT, Reason.TOO_FEW_FREE_GPUS, Reason.TOO_FEW_GPUS})
"""Reasons kube-scheduler's resource fit gives: room, which running pods finishing can change."""


def turned_down_before_phalanx(pod: Pod, snapshot: ClusterSnapshot) -> Mapping[str, Rejection]:
    """The nodes that never reach phalanx's filter for ``pod``, each with its reason, by name."""
    found: dict[str, Rejection] = {}
    for name in sorted(snapshot.nodes):
        node = snapshot.nodes[name]
        rejection = node_rejection(node) or scheduler_rejection(pod, node, snapshot.usage_of(name).requested)
        if rejection is not None:
            found[name] = rejection
    return MappingProxyType(found)


def candidates(snapshot: ClusterSnapshot, before: Mapping[str, Rejection]) -> tuple[str, ...]:
    """The nodes kube-scheduler would send phalanx: every node not turned down before, by name."""
    return tuple(name for name in sorted(snapshot.nodes) if name not in before)


def usable(snapshot: ClusterSnapshot, before: Mapping[str, Rejection]) -> tuple[str, ...]:
    """The nodes the pod may go to once they have room: healthy, and no taint, selector or affinity against.

    The candidates and the nodes turned down for room alone (CPU, memory, GPU count), by name: waiting
    can change room, never the rest.
    """
    return tuple(
        name for name in sorted(snapshot.nodes) if name not in before or before[name].reason in ROOM_KINDS
    )


def unconstrained(pod: Pod, snapshot: ClusterSnapshot) -> tuple[str, ...]:
    """The nodes kube-scheduler would send phalanx were the pod free of taints, selector and affinity.

    Healthy nodes with room by count, by name.
    """
    return tuple(
        name
        for name in sorted(snapshot.nodes)
        if node_rejection(snapshot.nodes[name]) is None
        and room_rejection(pod, snapshot.nodes[name], snapshot.usage_of(name).requested) is None
    )


def group_nodes(
    sample: Pod,
    nodes: Sequence[str],
    before: Mapping[str, Rejection],
    snapshot: ClusterSnapshot,
    promises: PromiseBook,
    *,
    fits: str,
) -> tuple[NodeGroup, ...]:
    """Every node, grouped by its reason for ``sample`` (see the module docstring for the order).

    Args:
        sample: the pod whose GPU fit is checked (a gang's largest waiting member).
        nodes: the candidates phalanx's filter sees.
        before: the nodes turned down before phalanx, with their reasons.
        snapshot: the cluster.
        promises: GPUs promised to others.
        fits: the sentence for nodes with room.

    Returns:
        Groups with nodes turned down first, the largest first, then by sentence; the nodes with room last.
    """
    fit = filter_nodes(sample, nodes, snapshot, promises)
    by_reason: dict[tuple[str, str], list[str]] = {}
    for name, rejection in [*before.items(), *fit.rejected.items()]:
        by_reason.setdefault((rejection.reason.value, rejection.message), []).append(name)
    for name in fit.feasible:
        by_reason.setdefault((FITS, fits), []).append(name)
    groups = [
        NodeGroup(kind, message, len(names), tuple(sorted(names)))
        for (kind, message), names in by_reason.items()
    ]
    return tuple(sorted(groups, key=lambda g: (g.kind == FITS, -g.count, g.message)))
