"""kube-scheduler's own node filters as the core computes them (taints, selector, affinity, CPU/memory)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from scheduling.model import (
    Node,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    Pod,
    Resources,
    Taint,
    Toleration,
)
from scheduling.nodes.constraints import scheduler_rejection, tolerates
from scheduling.reasons import Reason
from tests.builders import a_node, a_pod

GPU_RESERVED = Taint("gpu", "reserved", "NoSchedule")

# (toleration, taint) -> tolerated
TOLERATIONS = {
    "same key, Exists": (Toleration("gpu", "Exists"), GPU_RESERVED, True),
    "same key and value": (Toleration("gpu", "Equal", "reserved"), GPU_RESERVED, True),
    "same key, other value": (Toleration("gpu", "Equal", "shared"), GPU_RESERVED, False),
    "other key": (Toleration("dedicated", "Exists"), GPU_RESERVED, False),
    "empty key with Exists tolerates all": (Toleration("", "Exists"), GPU_RESERVED, True),
    "empty key with Equal tolerates nothing": (Toleration("", "Equal", "reserved"), GPU_RESERVED, False),
    "other effect": (Toleration("gpu", "Exists", effect="NoExecute"), GPU_RESERVED, False),
    "same effect": (Toleration("gpu", "Exists", effect="NoSchedule"), GPU_RESERVED, True),
}


@pytest.mark.parametrize(("toleration", "taint", "expected"), TOLERATIONS.values(), ids=TOLERATIONS.keys())
def test_a_toleration_matches_a_taint_by_kubernetes_rules(
    toleration: Toleration, taint: Taint, expected: bool
) -> None:
    assert tolerates(toleration, taint) is expected


def term(*requirements: NodeSelectorRequirement) -> NodeSelectorTerm:
    return NodeSelectorTerm(requirements)


H100 = NodeSelectorRequirement("gpu-type", "In", ("h100",))
NODE = a_node("n1").labels(**{"gpu-type": "a100", "phalanx.io/rack": "rack-1", "gpus": "8"}).build()
TAINTED = replace(NODE, taints=(Taint("soft", effect="PreferNoSchedule"), GPU_RESERVED))
POD = a_pod("p").gpus(1).build()

# (node, pod) -> (reason, message) or None when kube-scheduler lets the pod through
CASES: dict[str, tuple[Node, Pod, tuple[Reason, str] | None]] = {
    "no constraint": (NODE, POD, None),
    "an untolerated taint, PreferNoSchedule ignored": (
        TAINTED,
        POD,
        (Reason.TAINT, "node(s) with taint gpu=reserved:NoSchedule the pod does not tolerate"),
    ),
    "a tolerated taint": (TAINTED, replace(POD, tolerations=(Toleration("gpu", "Exists"),)), None),
    "a node selector the node lacks": (
        NODE,
        replace(POD, node_selector={"gpu-type": "h100", "phalanx.io/rack": "rack-1"}),
        (
            Reason.NODE_SELECTOR,
            "node(s) not matching the pod's node selector gpu-type=h100, phalanx.io/rack=rack-1",
        ),
    ),
    "a node selector the node has": (NODE, replace(POD, node_selector={"gpu-type": "a100"}), None),
    "the taint is reported before the selector": (
        TAINTED,
        replace(POD, node_selector={"gpu-type": "h100"}),
        (Reason.TAINT, "node(s) with taint gpu=reserved:NoSchedule the pod does not tolerate"),
    ),
    "affinity none of whose terms holds": (
        NODE,
        replace(POD, affinity=(term(H100), term(NodeSelectorRequirement("gpus", "Gt", ("8",))))),
        (
            Reason.NODE_AFFINITY,
            "node(s) not matching the pod's required node affinity (gpu-type In (h100); or gpus Gt (8))",
        ),
    ),
    "affinity with one term holding": (
        NODE,
        replace(POD, affinity=(term(H100), term(NodeSelectorRequirement("gpus", "Lt", ("9",))))),
        None,
    ),
    "a term holds only when all its requirements do": (
        NODE,
        replace(POD, affinity=(term(NodeSelectorRequirement("gpu-type", "NotIn", ("h100",)), H100),)),
        (
            Reason.NODE_AFFINITY,
            "node(s) not matching the pod's required node affinity "
            "(gpu-type NotIn (h100) and gpu-type In (h100))",
        ),
    ),
    "DoesNotExist and matchFields on the name": (
        NODE,
        replace(
            POD,
            affinity=(
                term(
                    NodeSelectorRequirement("zone", "DoesNotExist"),
                    NodeSelectorRequirement("metadata.name", "In", ("n1",), on_name=True),
                ),
            ),
        ),
        None,
    ),
    "an empty term holds for no node": (
        NODE,
        replace(POD, affinity=(term(),)),
        (Reason.NODE_AFFINITY, "node(s) not matching the pod's required node affinity (an empty term)"),
    ),
    "too little free CPU": (
        a_node("n1").cpu(4000).build(),
        a_pod("p").cpu(3000).build(),
        (Reason.INSUFFICIENT, "node(s) with too little free CPU (pod requests 3 CPU)"),
    ),
    "a node that declares no memory does not constrain it": (
        a_node("n1").memory(0).build(),
        a_pod("p").memory(2**40).build(),
        None,
    ),
}


@pytest.mark.parametrize(("node", "pod", "expected"), CASES.values(), ids=CASES.keys())
def test_the_first_in_tree_filter_that_fails_is_the_nodes_reason(
    node: Node, pod: Pod, expected: tuple[Reason, str] | None
) -> None:
    used = Resources(milli_cpu=2000) if node.allocatable.milli_cpu == 4000 else Resources()
    rejection = scheduler_rejection(pod, node, used)
    assert (None if rejection is None else (rejection.reason, rejection.message)) == expected


@pytest.mark.parametrize(
    ("need", "used", "expected"),
    [
        (4, 6, (Reason.TOO_FEW_FREE_GPUS, "node(s) with too few free GPUs (2 free, pod needs 4)")),
        (16, 0, (Reason.TOO_FEW_GPUS, "node(s) with only 8 GPUs in total (pod needs 16 on one node)")),
        (2, 6, None),
    ],
    ids=["too few free by count", "more than the node has", "fits by count"],
)
def test_gpus_are_counted_by_number_as_kube_scheduler_counts_them(
    need: int, used: int, expected: tuple[Reason, str] | None
) -> None:
    rejection = scheduler_rejection(a_pod("p").gpus(need).build(), a_node("n1").build(), Resources(gpus=used))
    assert (None if rejection is None else (rejection.reason, rejection.message)) == expected
