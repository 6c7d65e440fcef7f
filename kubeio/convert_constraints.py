"""API JSON -> the pod and node fields kube-scheduler filters nodes by before it asks phalanx.

``spec.nodeSelector``, ``spec.tolerations`` and the required part of ``spec.affinity.nodeAffinity`` of
a pod, and ``spec.taints`` of a node. The extender never needs them (kube-scheduler applies them before
it sends the candidates), but ``phalanx why`` must say which nodes they exclude
(``scheduling.nodes.constraints``), so they are read into the model with the same checks as every other
field: a wrongly typed one raises ``ConvertError`` with its path.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kubeio.api_fields import labels_field, list_field, obj_field, str_field
from scheduling.model import NodeSelectorRequirement, NodeSelectorTerm, Taint, Toleration


def node_selector_of(spec: Mapping[str, Any]) -> Mapping[str, str]:
    """``spec.nodeSelector``."""
    return labels_field(spec.get("nodeSelector"), "spec.nodeSelector")


def tolerations_of(spec: Mapping[str, Any]) -> tuple[Toleration, ...]:
    """``spec.tolerations``, in order (an absent operator is ``Equal``, as the API server defaults it)."""
    found = []
    for i, item in enumerate(list_field(spec.get("tolerations"), "spec.tolerations")):
        where = f"spec.tolerations[{i}]"
        raw = obj_field(item, where, optional=False)
        found.append(
            Toleration(
                key=str_field(raw.get("key"), f"{where}.key"),
                operator=str_field(raw.get("operator"), f"{where}.operator") or "Equal",
                value=str_field(raw.get("value"), f"{where}.value"),
                effect=str_field(raw.get("effect"), f"{where}.effect"),
            )
        )
    return tuple(found)


def taints_of(spec: Mapping[str, Any]) -> tuple[Taint, ...]:
    """A node's ``spec.taints``, in order."""
    found = []
    for i, item in enumerate(list_field(spec.get("taints"), "spec.taints")):
        where = f"spec.taints[{i}]"
        raw = obj_field(item, where, optional=False)
        found.append(
            Taint(
                key=str_field(raw.get("key"), f"{where}.key", required=True),
                value=str_field(raw.get("value"), f"{where}.value"),
                effect=str_field(raw.get("effect"), f"{where}.effect", required=True),
            )
        )
    return tuple(found)


def _requirements(value: object, where: str, *, on_name: bool) -> list[NodeSelectorRequirement]:
    found = []
    for i, item in enumerate(list_field(value, where)):
        at = f"{where}[{i}]"
        raw = obj_field(item, at, optional=False)
        values = list_field(raw.get("values"), f"{at}.values")
        found.append(
            NodeSelectorRequirement(
                key=str_field(raw.get("key"), f"{at}.key", required=True),
                operator=str_field(raw.get("operator"), f"{at}.operator", required=True),
                values=tuple(str_field(v, f"{at}.values[{j}]") for j, v in enumerate(values)),
                on_name=on_name,
            )
        )
    return found


def affinity_of(spec: Mapping[str, Any]) -> tuple[NodeSelectorTerm, ...]:
    """The terms of ``spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution``.

    Preferred terms only rank nodes, so they never exclude one and are not read.
    """
    base = "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
    affinity = obj_field(spec.get("affinity"), "spec.affinity")
    node = obj_field(affinity.get("nodeAffinity"), "spec.affinity.nodeAffinity")
    required = obj_field(node.get("requiredDuringSchedulingIgnoredDuringExecution"), base)
    terms = []
    for i, item in enumerate(list_field(required.get("nodeSelectorTerms"), f"{base}.nodeSelectorTerms")):
        at = f"{base}.nodeSelectorTerms[{i}]"
        raw = obj_field(item, at, optional=False)
        expressions = _requirements(raw.get("matchExpressions"), f"{at}.matchExpressions", on_name=False)
        fields = _requirements(raw.get("matchFields"), f"{at}.matchFields", on_name=True)
        terms.append(NodeSelectorTerm(tuple(expressions + fields)))
    return tuple(terms)
