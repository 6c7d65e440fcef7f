from __future__ import annotations

from dataclasses import dataclass

import pytest

from scheduling.cluster.promises import Promise, PromiseBook
from scheduling.gang.planner import GangPlan, GangShortfall, plan_gang
from scheduling.model import Node, Pod
from scheduling.topology import TopologyCache
from tests.builders import a_node, a_pod, members, snapshot_of


def rack(name: str, rack: str, gpus: int = 8) -> Node:
    return a_node(name).gpus(gpus).labels(**{"phalanx.io/rack": rack}).build()


@dataclass(frozen=True)
class Case:
    name: str
    nodes: tuple[Node, ...]
    gang: tuple[Pod, ...]
    running: tuple[Pod, ...] = ()
    promised: tuple[Promise, ...] = ()
    nodes_used: tuple[str, ...] | None = None
    shortfall: str | None = None


CASES = [
    Case(
        "16 one-GPU workers fill two nodes, not three",
        tuple(rack(f"n{i}", "r1") for i in (1, 2, 3)),
        tuple(members("g", 16, 1)),
        nodes_used=("n1", "n2"),
    ),
    Case(
        "8-GPU gang stays in the rack that can hold it",
        (rack("a1", "ra"), rack("b1", "rb"), rack("b2", "rb")),
        tuple(members("g", 2, 8)),
        nodes_used=("b1", "b2"),
    ),
    Case(
        "launcher without GPUs joins a worker node",
        (rack("n1", "r1"), rack("n2", "r1")),
        (*members("g", 2, 4), a_pod("launcher").cpu(500).group("g").build()),
        nodes_used=("n1",),
    ),
    Case(
        "too big for the cluster",
        (rack("n1", "r1"), rack("n2", "r1")),
        tuple(members("g", 3, 8)),
        shortfall="gang ml/g: needs 24 GPUs for 3 pods (8 per pod); "
        "16 free on 2 nodes, at most 8 on one node",
    ),
    Case(
        "another gang's reservation counts as used",
        (rack("n1", "r1"), rack("n2", "r1")),
        tuple(members("g", 2, 8)),
        promised=(Promise("x", "ml/x", "n2", tuple(range(8)), 99.0, group="ml/other"),),
        shortfall="gang ml/g: needs 16 GPUs for 2 pods (8 per pod); 8 free on 1 node, at most 8 on one node",
    ),
    Case(
        "fragmented free GPUs do not fit an 8-GPU member",
        (rack("n1", "r1"), rack("n2", "r1")),
        tuple(members("g", 1, 8)),
        running=(
            a_pod("x").gpus(4).on("n1", range(4)).build(),
            a_pod("y").gpus(4).on("n2", range(4)).build(),
        ),
        shortfall="gang ml/g: needs 8 GPUs for 1 pod (8 per pod); 8 free on 2 nodes, at most 4 on one node",
    ),
    Case(
        "mixed sizes list each",
        (rack("n1", "r1", 4),),
        (*members("g", 1, 4), *members("g", 1, 2, prefix="v")),
        shortfall="gang ml/g: needs 6 GPUs for 2 pods (4 + 2); 4 free on 1 node, at most 4 on one node",
    ),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_plan_gang(case: Case) -> None:
    book = PromiseBook().add_all(case.promised)
    snapshot = snapshot_of(case.nodes, case.running)
    result = plan_gang("ml/g", case.gang, [n.name for n in case.nodes], snapshot, book, TopologyCache())
    if case.shortfall is not None:
        assert isinstance(result, GangShortfall)
        assert result.message == case.shortfall
        return
    assert isinstance(result, GangPlan)
    assert result.nodes == case.nodes_used
    assert {p.pod.uid for p in result.placements} == {p.uid for p in case.gang}
    taken = [(p.node, g) for p in result.placements for g in p.gpus]
    assert len(taken) == len(set(taken)), "no GPU is planned twice"


def test_the_same_input_gives_the_same_plan() -> None:
    nodes = [rack(f"n{i}", f"r{i % 2}") for i in range(6)]
    gang = members("g", 12, 2)
    plans = {
        plan_gang(
            "ml/g",
            gang,
            [n.name for n in reversed(nodes)],
            snapshot_of(nodes),
            PromiseBook(),
            TopologyCache(),
        )
        for _ in range(3)
    }
    assert len(plans) == 1


def test_cpu_and_memory_bound_the_plan_too() -> None:
    small = a_node("n1").build()
    gang = [a_pod(f"c{i}").cpu(40_000).group("g").build() for i in range(2)]
    result = plan_gang("ml/g", gang, ["n1"], snapshot_of([small]), PromiseBook(), TopologyCache())
    assert isinstance(result, GangShortfall)
    assert "CPU or memory" in result.message


def test_members_pinned_to_different_nodes_each_go_to_their_own() -> None:
    """Pinned workers are not planned on the filtered member's candidates.

    Guards against three 8-GPU workers pinned to three nodes never running, all planned on the first one's.
    """
    nodes = [a_node(f"n{i}").build() for i in (1, 2, 3)]
    workers = [a_pod(f"w{i}").gpus(8).group("g").pinned(f"n{i}").build() for i in (1, 2, 3)]
    plan = plan_gang("ml/g", workers, ["n1"], snapshot_of(nodes), PromiseBook(), TopologyCache())
    assert isinstance(plan, GangPlan)
    assert [(p.pod.name, p.node) for p in plan.placements] == [("w1", "n1"), ("w2", "n2"), ("w3", "n3")]


def test_a_member_pinned_to_a_full_node_is_named() -> None:
    nodes = [a_node("n1").build(), a_node("n2").build()]
    busy = a_pod("busy").gpus(8).on("n2", range(8)).build()
    workers = [
        a_pod("w1").gpus(2).group("g").pinned("n1").build(),
        a_pod("w2").gpus(2).group("g").pinned("n2").build(),
    ]
    plan = plan_gang("ml/g", workers, ["n1"], snapshot_of(nodes, [busy]), PromiseBook(), TopologyCache())
    assert isinstance(plan, GangShortfall)
    assert plan.message == "gang ml/g: w2 is pinned to n2, which has no room for it now"
