"""Dead and drained nodes in the core: filter turns them down, gangs lose members on them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

import pytest

from scheduling.admission.queue_hold import AdmittedBook
from scheduling.cluster.promises import Promise, PromiseBook
from scheduling.gang.status import find_shortage
from scheduling.model import Node, Pod
from scheduling.reasons import Code, Reason
from scheduling.session import FilterInput, FilterOutcome, SessionSettings, filter_pod
from scheduling.topology import TopologyCache
from tests.builders import a_gang, a_node, a_pod, members, snapshot_of

DEAD = a_node("n1").not_ready().build()
DRAINED = a_node("n2").cordoned().build()
HEALTHY = [a_node("n3").build(), a_node("n4").build()]
CANDIDATES = ("n1", "n2", "n3", "n4", "gone")


def decide(pod: Pod, pods: Sequence[Pod] = (), book: PromiseBook | None = None) -> FilterOutcome:
    snapshot = snapshot_of([DEAD, DRAINED, *HEALTHY], [*pods, pod], [a_gang("g", 2)])
    request = FilterInput(pod, CANDIDATES, snapshot, book or PromiseBook(), None, AdmittedBook(), 1.0)
    return filter_pod(request, topologies=TopologyCache(), settings=SessionSettings())


GANG = members("g", 2, 8)


@pytest.mark.parametrize(
    ("pod", "pods"),
    [
        (a_pod("alone").gpus(1).build(), []),
        (a_pod("cpu-only").cpu(100).build(), []),
        (GANG[0], GANG[1:]),
    ],
    ids=["a GPU pod on its own", "a pod without GPUs", "a gang member"],
)
def test_filter_turns_down_not_ready_cordoned_and_unknown_nodes_for_every_pod(
    pod: Pod, pods: list[Pod]
) -> None:
    outcome = decide(pod, pods)
    got = {node: (r.code, r.reason) for node, r in outcome.rejected.items() if node in ("n1", "n2", "gone")}
    assert got == {
        "n1": (Code.UNRESOLVABLE, Reason.NOT_READY),
        "n2": (Code.UNRESOLVABLE, Reason.CORDONED),
        "gone": (Code.UNRESOLVABLE, Reason.UNKNOWN_NODE),
    }
    assert outcome.rejected["n1"].message == (
        "node(s) not Ready (the kubelet stopped reporting or reports the node unhealthy)"
    )
    cordoned = "node(s) cordoned (spec.unschedulable: an admin keeps new pods off)"
    assert outcome.rejected["n2"].message == cordoned
    assert outcome.feasible
    assert set(outcome.feasible) <= {"n3", "n4"}


def test_a_gang_is_planned_on_healthy_nodes_only_and_says_so() -> None:
    outcome = decide(GANG[0], GANG[1:])
    assert outcome.plan is not None
    assert sorted(a.node for a in outcome.plan.assignments) == ["n3", "n4"]


def test_a_reservation_on_a_node_that_died_is_planned_again_elsewhere() -> None:
    held = [
        Promise(GANG[0].uid, GANG[0].key, "n1", tuple(range(8)), 100.0, GANG[0].requests, "ml/g"),
        Promise(GANG[1].uid, GANG[1].key, "n3", tuple(range(8)), 100.0, GANG[1].requests, "ml/g"),
    ]
    outcome = decide(GANG[0], GANG[1:], PromiseBook().add_all(held))
    assert outcome.rejected["n1"].reason is Reason.NOT_READY
    assert outcome.plan is not None
    assert sorted(a.node for a in outcome.plan.assignments) == ["n3", "n4"]
    assert {p.node for p in outcome.promises.by_uid.values()} == {"n3", "n4"}


def running(name: str, node: str, phase: str = "Running") -> Pod:
    return a_pod(name).gpus(8).group("g").on(node, range(8)).phase(phase).build()


NODES: Mapping[str, Node] = {n.name: n for n in (DEAD, DRAINED, *HEALTHY)}
PLACED = replace(a_gang("g", 2), phase="Running")


@pytest.mark.parametrize(
    ("gang", "message"),
    [
        (
            [running("w0", "n3"), running("w1", "n1")],
            "gang ml/g: only 1 of 2 members running (1 lost: w1 on node n1, not Ready); "
            "evicting the rest so the gang can be placed again whole",
        ),
        (
            [running("w0", "n3"), running("w1", "gone")],
            "gang ml/g: only 1 of 2 members running (1 lost: w1 on node gone, deleted); "
            "evicting the rest so the gang can be placed again whole",
        ),
        (
            [running("w0", "n1"), running("w1", "n3", "Failed"), running("w2", "n4")],
            "gang ml/g: only 1 of 2 members running (1 lost: w0 on node n1, not Ready; failed: w1); "
            "evicting the rest so the gang can be placed again whole",
        ),
    ],
    ids=["a member on a not-ready node", "a member on a deleted node", "one on a dead node, one failed"],
)
def test_a_member_on_a_dead_node_is_lost_and_the_message_names_the_node(
    gang: list[Pod], message: str
) -> None:
    shortage = find_shortage(PLACED, gang, NODES)
    assert shortage is not None
    assert shortage.message == message
    alive = sorted(m.name for m in gang if m.phase == "Running")
    assert [p.name for p in shortage.holding] == alive, "the gang is evicted whole, dead-node members too"


@pytest.mark.parametrize(
    ("gang", "nodes"),
    [
        ([running("w0", "n3"), running("w1", "n2")], NODES),
        ([running("w0", "n3"), running("w1", "n1")], None),
        ([running("w0", "n3"), running("w1", "n1"), running("w2", "n4")], NODES),
    ],
    ids=[
        "a member on a cordoned node keeps running",
        "nodes not listed yet: nothing looks deleted",
        "a surplus member on a dead node leaves minMember running",
    ],
)
def test_no_shortage_from_nodes(gang: list[Pod], nodes: Mapping[str, Node] | None) -> None:
    assert find_shortage(PLACED, gang, nodes) is None
