from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduling.cluster.promises import Promise, PromiseBook
from scheduling.cluster.room import NodeRoom
from scheduling.cluster.statement import Statement
from scheduling.gang import gang_planner
from scheduling.gang.gang_planner import GangPlan, GangShortfall, plan_gang
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
    assert {a.uid for a in result.assignments} == {p.uid for p in case.gang}
    taken = [(a.node, g) for a in result.assignments for g in a.gpus]
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
    assert [(a.pod, a.node) for a in plan.assignments] == [("ml/w1", "n1"), ("ml/w2", "n2"), ("ml/w3", "n3")]


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


def _reference_choice(
    pod: Pod,
    work: Statement,
    allowed: frozenset[str],
    used: Sequence[str],
    domain: tuple[str, str] | None,
    keys: Sequence[str],
) -> str | None:
    """The placement rule read literally: rank every fitting node for every member (the module docstring)."""
    rooms = work.rooms(allowed | set(used))
    fitting = [name for name in used if name in allowed and rooms[name].fits(pod)]
    if not fitting:
        fitting = [name for name, room in rooms.items() if name in allowed and room.fits(pod)]
    if not fitting:
        return None
    used_domains = {tuple(rooms[n].node.labels.get(k, "") for k in keys) for n in used}

    def rank(name: str) -> tuple[int, int, int, int, str]:
        room = rooms[name]
        in_domain = domain is None or room.node.labels.get(domain[0]) == domain[1]
        node_domain = tuple(room.node.labels.get(k, "") for k in keys)
        return (
            0 if name in used else 1,
            0 if in_domain else 1,
            0 if node_domain in used_domains else 1,
            room.count - pod.requests.gpus,
            name,
        )

    return min(fitting, key=rank)


@dataclass(frozen=True)
class _ReferenceDomains:
    """The preferred domain read literally: every candidate's free GPUs summed per domain, each time."""

    rooms: Mapping[str, NodeRoom]
    keys: Sequence[str]

    def preferred(self, total_gpus: int) -> tuple[str, str] | None:
        for key in self.keys:
            free: dict[str, int] = {}
            for room in self.rooms.values():
                value = room.node.labels.get(key)
                if value:
                    free[value] = free.get(value, 0) + room.count
            fitting = sorted((count, value) for value, count in free.items() if count >= total_gpus)
            if fitting:
                return key, fitting[0][1]
        return None


def _reference_domains(work: Statement, candidates: frozenset[str], keys: Sequence[str]) -> _ReferenceDomains:
    return _ReferenceDomains(work.rooms(candidates), keys)


CPU = st.sampled_from((0, 0, 1000, 3000, 6000))
"""Members' CPU requests (milli): members of one GPU count differ in CPU, as real jobs' members do."""


@st.composite
def _clusters(draw: st.DrawFn) -> tuple[list[Node], list[Pod], list[Pod], list[str]]:
    """Racks in zones, some GPUs held, a gang of mixed members (some pinned), and the offered nodes."""
    count = draw(st.integers(2, 24))
    nodes = [
        a_node(f"n{i:02d}")
        .gpus(draw(st.sampled_from((4, 8))))
        .cpu(draw(st.sampled_from((8000, 64000))))  # CPU that runs out before the GPUs do, on some
        .labels(
            **{"phalanx.io/rack": f"r{draw(st.integers(0, 4))}", "topology.kubernetes.io/zone": f"z{i % 2}"}
        )
        .build()
        for i in range(count)
    ]
    running = []
    for node in nodes:
        held = draw(st.integers(0, node.allocatable.gpus))
        if held:
            running.append(a_pod(f"busy-{node.name}").gpus(held).on(node.name, range(held)).build())
    gang = []
    for i in range(draw(st.integers(1, 40))):
        pod = a_pod(f"m{i:02d}").gpus(draw(st.sampled_from((0, 1, 1, 1, 2, 4, 8)))).cpu(draw(CPU)).group("g")
        if draw(st.integers(0, 3)) == 0:
            pod = pod.pinned(
                *draw(st.lists(st.sampled_from([n.name for n in nodes]), min_size=1, max_size=3))
            )
        gang.append(pod.build())
    offered = draw(st.lists(st.sampled_from([n.name for n in nodes]), min_size=1, unique=True))
    return nodes, running, gang, offered


@settings(max_examples=300, deadline=None)
@given(_clusters())
def test_ranking_fresh_nodes_once_places_every_member_as_ranking_them_each_time(
    cluster: tuple[list[Node], list[Pod], list[Pod], list[str]],
) -> None:
    """The planner ranks the nodes a gang does not use yet once per member shape; the plan is the rule's."""
    nodes, running, gang, offered = cluster

    def plan() -> GangPlan | GangShortfall:
        return plan_gang("ml/g", gang, offered, snapshot_of(nodes, running), PromiseBook(), TopologyCache())

    fast = plan()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(gang_planner, "_choose_node", _reference_choice)
        patch.setattr(gang_planner, "domain_room", _reference_domains)
        literal = plan()
    assert fast == literal


@st.composite
def _gangs_in_turn(draw: st.DrawFn) -> tuple[list[Node], list[Pod], list[list[Pod]], list[str]]:
    """A cluster and several gangs to plan one after the other on one statement, as a release pass does."""
    nodes, running, first, offered = draw(_clusters())
    gangs = [first]
    for g in range(draw(st.integers(1, 6))):
        gangs.append(
            [
                a_pod(f"g{g}-m{i:02d}")
                .gpus(draw(st.sampled_from((1, 1, 2, 4, 8))))
                .cpu(draw(CPU))
                .group(f"g{g}")
                .build()
                for i in range(draw(st.integers(1, 12)))
            ]
        )
    return nodes, running, gangs, offered


@settings(max_examples=200, deadline=None)
@given(_gangs_in_turn())
def test_gangs_planned_in_turn_on_one_statement_are_placed_as_ranking_every_node_each_time(
    cluster: tuple[list[Node], list[Pod], list[list[Pod]], list[str]],
) -> None:
    """The order kept on the statement across plans (and failed plans' rollbacks) changes no placement."""
    nodes, running, gangs, offered = cluster

    def plans() -> list[GangPlan | GangShortfall]:
        snapshot = snapshot_of(nodes, running)
        work = Statement(snapshot, PromiseBook())
        return [
            plan_gang(f"ml/g{i}", gang, offered, snapshot, PromiseBook(), TopologyCache(), statement=work)
            for i, gang in enumerate(gangs)
        ]

    kept = plans()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(gang_planner, "_choose_node", _reference_choice)
        patch.setattr(gang_planner, "domain_room", _reference_domains)
        literal = plans()
    assert kept == literal
