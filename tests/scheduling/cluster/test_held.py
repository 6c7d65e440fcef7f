"""Plans held per node (``HeldPlans``): what a node's planned pods leave, and which nodes are worked again.

That a chained release pass holding plans decides as a fresh one is the property test in
``tests/scheduling/admission/test_release_chain.py``; these are the rules on one node and the reuse.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

import pytest

from scheduling.cluster import held
from scheduling.cluster.held import NodeHold, hold_on
from scheduling.cluster.room import NodeRoom
from scheduling.cluster.state import ClusterState
from scheduling.cluster.statement import Statement, StatementChain
from scheduling.model import Pod
from tests.builders import a_node, a_pod


def planned(name: str, node: str, gpus: tuple[int, ...], request: int | None = None) -> Pod:
    """A pod released with a plan on ``node`` and ``gpus``, not bound yet."""
    pod = a_pod(name).gpus(len(gpus) if request is None else request).build()
    return replace(pod, plan=(node, gpus))


def cluster(*names: str) -> ClusterState:
    state = ClusterState()
    state.replace_nodes([a_node(n).build() for n in names])
    return state


def base(node: str = "n1") -> NodeRoom | None:
    return Statement(cluster(node).snapshot()).room(node)


@pytest.mark.parametrize(
    ("pods", "free", "broken"),
    [
        ([planned("a", "n1", (0, 1)), planned("b", "n1", (2,))], {3, 4, 5, 6, 7}, set()),
        ([planned("a", "n1", (0, 1)), planned("b", "n1", (1, 2))], {2, 3, 4, 5, 6, 7}, {"ml/b"}),
        ([planned("a", "n1", (0, 1), request=1)], set(range(8)), {"ml/a"}),
        ([planned("a", "n1", (8,))], set(range(8)), {"ml/a"}),
    ],
    ids=["both fit", "the later key loses a shared GPU", "plan and request disagree", "no such GPU"],
)
def test_a_nodes_plans_are_held_in_key_order_and_those_that_do_not_fit_are_broken(
    pods: list[Pod], free: set[int], broken: set[str]
) -> None:
    hold = hold_on(base(), pods)
    assert hold.room is not None
    assert (set(hold.room.free), set(hold.broken)) == (free, broken)


def test_on_a_node_that_takes_no_pods_every_plan_is_broken() -> None:
    assert hold_on(None, [planned("a", "n1", (0,))]) == NodeHold(
        (planned("a", "n1", (0,)),), None, frozenset({"ml/a"})
    )


Worked = list[tuple[str, ...]]


def recording(monkeypatch: pytest.MonkeyPatch) -> Worked:
    """Record the pods of every node ``HeldPlans`` works on (the rest it carries)."""
    worked: Worked = []
    real: Callable[[NodeRoom | None, Sequence[Pod]], NodeHold] = held.hold_on

    def spy(room: NodeRoom | None, pods: Sequence[Pod]) -> NodeHold:
        worked.append(tuple(p.name for p in pods))
        return real(room, pods)

    monkeypatch.setattr(held, "hold_on", spy)
    return worked


def test_a_later_decision_works_again_only_on_the_nodes_that_changed(monkeypatch: pytest.MonkeyPatch) -> None:
    state = cluster("n1", "n2")
    on_n1, on_n2 = planned("a", "n1", (0, 1)), planned("b", "n2", (0, 1))
    plans = {"n1": [on_n1], "n2": [on_n2]}
    worked, chain = recording(monkeypatch), StatementChain()
    first = chain.open(state.snapshot())
    assert first.held.hold(first, plans) == frozenset()
    assert sorted(worked) == [("a",), ("b",)]
    worked.clear()
    state.put_pod(a_pod("taker").gpus(2).on("n1", (0, 1)).build())  # a bind on n1's planned GPUs
    second = chain.open(state.snapshot())
    assert second.held.hold(second, plans) == {"ml/a"}
    assert worked == [("a",)], "n2 did not change: its hold is carried"
    room = second.room("n2")
    assert room is not None and room.free == frozenset(range(2, 8))


def test_a_node_whose_planned_pods_changed_is_worked_again(monkeypatch: pytest.MonkeyPatch) -> None:
    state = cluster("n1")
    worked, chain = recording(monkeypatch), StatementChain()
    first = chain.open(state.snapshot())
    first.held.hold(first, {"n1": [planned("a", "n1", (0,))]})
    second = chain.open(state.snapshot())
    second.held.hold(second, {"n1": [planned("a", "n1", (0,)), planned("b", "n1", (1,))]})
    third = chain.open(state.snapshot())
    third.held.hold(third, {})
    assert worked == [("a",), ("a", "b")]
    room = third.room("n1")
    assert room is not None and room.free == frozenset(range(8)), "no plan held: the node's own room"
