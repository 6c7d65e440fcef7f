"""Pins on the real control plane: pool nodes tainted, a worker tolerating only its node goes there.

The mechanics of pinning: a pending pod that only a pin taint keeps away is bound on its node
once it gets the toleration; and a gang whose members are pinned to different nodes binds whole
(the gang planner used to plan every member on the filtered member's nodes and never ran it).
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator

import pytest
from localbed import Testbed
from workload import create_pod, create_podgroup, events_for, get_pod, gpu_pod, member, podgroup, wait_for

from kubeio.errors import KubeError
from kubeio.pins import PinWriter, pin_toleration

pytestmark = pytest.mark.both_modes
"""Run with phalanx as the extender and as the framework sidecar (``tests/e2e/conftest.py``)."""

NODES = ("gpu-node-1", "gpu-node-2", "gpu-node-3")


@pytest.fixture
def pool(testbed: Testbed) -> Iterator[PinWriter]:
    """The three nodes tainted as a managed pool; the taints come off afterwards."""
    pins = PinWriter(testbed.http)
    for node in NODES:
        pins.taint_node(node, present=True)
    try:
        yield pins
    finally:
        for node in NODES:
            with contextlib.suppress(Exception):
                pins.taint_node(node, present=False)


def _node_of(testbed: Testbed, namespace: str, name: str) -> str | None:
    node = get_pod(testbed.http, namespace, name)["spec"].get("nodeName")
    return str(node) if node else None


@pytest.mark.extender_only("kube-scheduler places it with the placement manager stopped; no plan without it")
def test_a_pending_pod_pinned_to_a_pool_node_is_bound_there(
    testbed: Testbed, namespace: str, pool: PinWriter
) -> None:
    # The placement manager's pass would open the pool to this plain phalanx pod (an Exists toleration)
    # before the test pins it; this test is about a pin on a pending pod, so the pass is stopped meanwhile.
    testbed.kill_placement(signal.SIGTERM)
    for node in NODES:  # a pass that ran before the kill took the hand-made taints off (unlabelled nodes)
        pool.taint_node(node, present=True)
    try:
        _pin_a_pending_pod(testbed, namespace, pool)
    finally:
        testbed.start_placement()


def _pin_as_a_pass_would(pool: PinWriter, namespace: str, name: str, uid: str, node: str) -> bool:
    """Pin the pod, trying again while a write landed between the pin's read and its patch.

    kube-scheduler writes a pending pod's status as it retries it, and the pin's patch tests the
    resourceVersion it read (422 when it moved): the placement manager's next pass pins it then, so
    the test does the same rather than fail on the race (seen once in a full run).
    """
    for _ in range(5):
        try:
            return pool.pin_pod(namespace, name, uid, node)
        except KubeError as exc:
            if exc.status != 422:
                raise
    return pool.pin_pod(namespace, name, uid, node)


def _pin_a_pending_pod(testbed: Testbed, namespace: str, pool: PinWriter) -> None:
    created = create_pod(testbed.http, namespace, gpu_pod("w", 2))

    def turned_down_by_taints() -> bool:
        return any(
            e["reason"] == "FailedScheduling" and "taint" in e["message"]
            for e in events_for(testbed.http, namespace, "w")
        )

    wait_for("w turned down by the pool's taints", turned_down_by_taints, timeout=30)
    assert _node_of(testbed, namespace, "w") is None
    assert _pin_as_a_pass_would(pool, namespace, "w", created["metadata"]["uid"], "gpu-node-2")
    assert pool.pin_pod(namespace, "w", created["metadata"]["uid"], "gpu-node-2"), "a repeated pin is a no-op"
    assert wait_for("w bound", lambda: _node_of(testbed, namespace, "w"), timeout=30) == "gpu-node-2"
    tolerations = get_pod(testbed.http, namespace, "w")["spec"]["tolerations"]
    assert tolerations.count(pin_toleration("gpu-node-2")) == 1
    assert not pool.pin_pod(namespace, "w", "another-uid", "gpu-node-1"), "a re-created pod is not pinned"


def test_a_gang_whose_members_are_pinned_to_three_nodes_binds_whole(
    testbed: Testbed, namespace: str, pool: PinWriter
) -> None:
    create_podgroup(testbed.http, namespace, podgroup("spread", 3))
    for i, node in enumerate(NODES):
        pod = member(f"w{i}", "spread", 8)
        pod["spec"]["tolerations"] = [pin_toleration(node)]
        create_pod(testbed.http, namespace, pod)
    for i, node in enumerate(NODES):

        def bound(name: str = f"w{i}") -> str | None:
            return _node_of(testbed, namespace, name)

        assert wait_for(f"w{i} bound", bound, timeout=60) == node
