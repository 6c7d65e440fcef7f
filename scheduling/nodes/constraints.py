"""kube-scheduler's own node filters, as the core models them: taints, node selector, node affinity, room.

kube-scheduler runs its in-tree filters before it asks the extender, so phalanx's ``filter`` never sees
a node that a pod's ``nodeSelector``, required node affinity or an untolerated taint excludes, nor one
without the CPU or memory it requests. A user asking why a pod waits (``scheduling.explain``) must hear
about those nodes too, so the core computes the same answers from the fields the model carries, with
Kubernetes' rules:

- a taint with effect ``NoSchedule`` or ``NoExecute`` excludes the node unless one toleration matches it
  (same key, or an empty key with ``Exists``; same value unless ``Exists``; same effect, or none given);
- every ``nodeSelector`` label must be on the node with that value;
- of the required node-affinity terms, one must hold, and a term holds when all its requirements do
  (``In``, ``NotIn``, ``Exists``, ``DoesNotExist``, ``Gt``, ``Lt``; ``matchFields`` on the node's name);
  a term with no requirement holds for no node;
- the node's CPU and memory, when it declares them, and its ``nvidia.com/gpu`` must cover what its live
  pods request plus the pod.

The checks run in kube-scheduler's order (TaintToleration, NodeAffinity, NodeResourcesFit) and the first
that fails is the node's reason.
"""

from __future__ import annotations

from collections.abc import Iterable

from scheduling import reasons
from scheduling.model import (
    Node,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    Pod,
    Resources,
    Taint,
    Toleration,
)
from scheduling.reasons import Rejection
from scheduling.resources import CPU, MEMORY, amount, format_quantity, node_left

SCHEDULING_EFFECTS = frozenset({"NoSchedule", "NoExecute"})
"""Taint effects that keep new pods off a node (``PreferNoSchedule`` only discourages)."""


def tolerates(toleration: Toleration, taint: Taint) -> bool:
    """Whether ``toleration`` matches ``taint`` (Kubernetes' ``ToleratesTaint``).

    >>> tolerates(Toleration("gpu", "Exists"), Taint("gpu", "reserved"))
    True
    >>> tolerates(Toleration("gpu", "Equal", "shared"), Taint("gpu", "reserved"))
    False
    >>> tolerates(Toleration(operator="Exists"), Taint("anything", effect="NoExecute"))
    True
    """
    if toleration.effect and toleration.effect != taint.effect:
        return False
    if toleration.key and toleration.key != taint.key:
        return False
    if toleration.operator == "Exists":
        return True
    return bool(toleration.key) and toleration.value == taint.value


def untolerated(pod: Pod, node: Node) -> Taint | None:
    """The first of ``node``'s scheduling taints that none of ``pod``'s tolerations matches, if any."""
    for taint in node.taints:
        if taint.effect in SCHEDULING_EFFECTS and not any(tolerates(t, taint) for t in pod.tolerations):
            return taint
    return None


def _holds(requirement: NodeSelectorRequirement, node: Node) -> bool:
    if requirement.on_name:
        value: str | None = node.name if requirement.key == "metadata.name" else None
    else:
        value = node.labels.get(requirement.key)
    op, values = requirement.operator, requirement.values
    if op == "In":
        return value is not None and value in values
    if op == "NotIn":
        return value is None or value not in values
    if op == "Exists":
        return value is not None
    if op == "DoesNotExist":
        return value is None
    if op in ("Gt", "Lt") and value is not None and len(values) == 1:
        try:
            have, bound = int(value), int(values[0])
        except ValueError:
            return False
        return have > bound if op == "Gt" else have < bound
    return False


def matches_term(term: NodeSelectorTerm, node: Node) -> bool:
    """Whether ``node`` meets every requirement of ``term`` (an empty term meets none)."""
    return bool(term.requirements) and all(_holds(r, node) for r in term.requirements)


def describe_terms(terms: Iterable[NodeSelectorTerm]) -> str:
    """The terms in words: ``gpu In (a100, h100) and zone Exists; or ...``.

    >>> describe_terms([NodeSelectorTerm((NodeSelectorRequirement("gpu", "In", ("h100",)),))])
    'gpu In (h100)'
    """
    parts = []
    for term in terms:
        said = [
            r.key + f" {r.operator}" + (f" ({', '.join(r.values)})" if r.values else "")
            for r in term.requirements
        ]
        parts.append(" and ".join(said) or "an empty term")
    return "; or ".join(parts)


def describe_selector(pod: Pod) -> str:
    """The pod's node selector as ``key=value, ...``, sorted by key."""
    return ", ".join(f"{k}={v}" for k, v in sorted(pod.node_selector.items()))


def placement_rejection(pod: Pod, node: Node) -> Rejection | None:
    """Why kube-scheduler keeps ``pod`` off ``node`` by taint, selector or affinity; ``None``: it may go.

    These never change while the pod waits (evicting pods frees no node from a taint), unlike room.
    """
    taint = untolerated(pod, node)
    if taint is not None:
        return reasons.untolerated_taint(str(taint))
    if any(node.labels.get(k) != v for k, v in pod.node_selector.items()):
        return reasons.node_selector_mismatch(describe_selector(pod))
    if pod.affinity and not any(matches_term(term, node) for term in pod.affinity):
        return reasons.node_affinity_mismatch(describe_terms(pod.affinity))
    return None


def room_rejection(pod: Pod, node: Node, used: Resources) -> Rejection | None:
    """Why ``node`` lacks CPU, memory or GPUs for ``pod`` after ``used`` (its live pods), if it does.

    kube-scheduler counts ``nvidia.com/gpu`` by number against allocatable ("Insufficient
    nvidia.com/gpu") and then does not ask phalanx about the node; the reason is given in phalanx's own
    words for the same fact (``reasons.too_few_free_gpus``, ``reasons.too_few_gpus``), with the free count.
    """
    left = node_left(node, used)
    for resource in (CPU, MEMORY):
        declared, need = amount(node.allocatable, resource), amount(pod.requests, resource)
        if declared and need > amount(left, resource):
            label = "CPU" if resource == CPU else "memory"
            return reasons.insufficient(label, format_quantity(resource, need))
    need, declared = pod.requests.gpus, node.allocatable.gpus
    if need > declared:
        return reasons.too_few_gpus(declared, need)
    if need > declared - used.gpus:
        return reasons.too_few_free_gpus(max(0, declared - used.gpus), need)
    return None


def scheduler_rejection(pod: Pod, node: Node, used: Resources) -> Rejection | None:
    """What kube-scheduler's in-tree filters say of ``node`` for ``pod``, in their order; ``None``: passes."""
    return placement_rejection(pod, node) or room_rejection(pod, node, used)
