"""A GPU the node agent reports unhealthy (``phalanx.io/unhealthy-gpus``) is given to no pod."""

from __future__ import annotations

import pytest

from kubeio.convert import node_from_api
from scheduling.cluster.usage import NodeGpuUsage, free_gpus
from scheduling.model import Node, Pod, Resources
from scheduling.topology import prepare_topology
from scheduling.topology.builders import uniform

EIGHT = prepare_topology(uniform(8, "NV12", gpu_model="NVIDIA A100-SXM4-40GB"))


@pytest.mark.parametrize(
    ("allocatable", "unhealthy", "topology", "indices"),
    [
        (8, frozenset(), EIGHT, set(range(8))),
        (7, frozenset({3}), EIGHT, {0, 1, 2, 4, 5, 6, 7}),
        (8, frozenset({3}), EIGHT, {0, 1, 2, 4, 5, 6, 7}),  # the kubelet has not counted it out yet
        (6, frozenset({3}), EIGHT, {0, 1, 2, 4, 5, 6}),  # it counts out one more that phalanx was not told of
        (7, frozenset({3}), None, {0, 1, 2, 4, 5, 6, 7}),
        (6, frozenset(), EIGHT, set(range(6))),
    ],
    ids=[
        "healthy",
        "one-failed",
        "before-the-kubelet",
        "kubelet-knows-more",
        "no-topology",
        "allocatable-cuts",
    ],
)
def test_the_indices_a_node_offers(
    allocatable: int, unhealthy: frozenset[int], topology: object, indices: set[int]
) -> None:
    node = Node("n", Resources(gpus=allocatable), topology=topology, unhealthy_gpus=unhealthy)  # type: ignore[arg-type]
    assert node.gpu_indices == frozenset(indices)
    assert node.gpu_total == len(indices)


def test_the_free_gpus_leave_out_the_failed_one_even_while_a_pod_still_holds_it() -> None:
    node = Node("n", Resources(gpus=7), topology=EIGHT, unhealthy_gpus=frozenset({3}))
    holder = Pod("u", "ns", "a", Resources(gpus=2), node_name="n", gpu_indices=(3, 4), phase="Running")
    free = free_gpus(node, NodeGpuUsage.of_pods([holder]), frozenset())
    assert free.indices == frozenset({0, 1, 2, 5, 6, 7})


def test_the_annotation_is_read_from_the_node() -> None:
    raw = {
        "metadata": {"name": "n", "annotations": {"phalanx.io/unhealthy-gpus": "5,2"}},
        "status": {"allocatable": {"nvidia.com/gpu": "6"}},
    }
    assert node_from_api(raw).unhealthy_gpus == frozenset({2, 5})
