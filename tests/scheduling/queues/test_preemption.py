from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from scheduling.queues.model import QueueTree
from scheduling.queues.preemption import GangMember, Preemptor, VictimPod, preempt_within_queue
from tests.scheduling.queues.builders import gpu_queue

PREEMPTOR = Preemptor("ml/urgent", "team-a", priority=50, gang="ml/urgent")
NOW = 1000.0


def pod(
    name: str,
    *,
    queue: str = "team-a",
    priority: int = 0,
    preemptible: bool = True,
    gang: str | None = None,
    started_at: float | None = None,
) -> VictimPod:
    return VictimPod(f"uid-{name}", f"ml/{name}", queue, priority, preemptible, gang, started_at)


@dataclass(frozen=True)
class Case:
    name: str
    proposed: dict[str, tuple[VictimPod, ...]]
    victims: dict[str, tuple[str, ...]]
    reasons: tuple[str, ...] = ()
    members: dict[str, tuple[GangMember, ...]] = field(default_factory=dict)
    companions: dict[str, tuple[str, ...]] | None = None


G0, G1, G2 = (pod(f"g-{i}", gang="ml/g") for i in range(3))

CASES = [
    Case(
        "a lower-priority pod of the same queue goes",
        {"n1": (pod("low"),)},
        {"n1": ("uid-low",)},
    ),
    Case(
        "other queues, equal priority, non-preemptible and young pods stay; an emptied node is dropped",
        {
            "n1": (
                pod("other", queue="team-b"),
                pod("equal", priority=50),
                pod("pinned", preemptible=False),
                pod("young", started_at=NOW - 30),
            ),
            "n2": (pod("low"), pod("other2", queue="team-b")),
        },
        {"n2": ("uid-low",)},
        (
            "pod ml/equal is not preempted: its priority 50 is not lower than ml/urgent's 50",
            "pod ml/other is not preempted: it is in queue team-b, not team-a; "
            "priority preempts only within a queue",
            "pod ml/pinned is not preempted: it is not preemptible",
            "pod ml/young is not preempted: it has run 30s of its queue's minimum runtime 60s",
            "node n1 is dropped: none of its proposed victims may be preempted",
            "pod ml/other2 is not preempted: it is in queue team-b, not team-a; "
            "priority preempts only within a queue",
        ),
    ),
    Case(
        "the rest of a gang on the same node is added",
        {"n1": (G0,)},
        {"n1": ("uid-g-0", "uid-g-1")},
        ("pod ml/g-1 on node n1 is added: gang ml/g is evicted whole",),
        members={"ml/g": (GangMember("n1", G0), GangMember("n1", G1))},
        companions={"n1": ()},
    ),
    Case(
        "members on other nodes go with the chosen node",
        {"n1": (G0,), "n2": (G1,)},
        {"n1": ("uid-g-0",), "n2": ("uid-g-1",)},
        (
            "pod ml/g-1 on node n2 goes too if node n1 is chosen: gang ml/g is evicted whole",
            "pod ml/g-2 on node n3 goes too if node n1 is chosen: gang ml/g is evicted whole",
            "pod ml/g-0 on node n1 goes too if node n2 is chosen: gang ml/g is evicted whole",
            "pod ml/g-2 on node n3 goes too if node n2 is chosen: gang ml/g is evicted whole",
        ),
        members={"ml/g": (GangMember("n1", G0), GangMember("n2", G1), GangMember("n3", G2))},
        companions={"n1": ("uid-g-1", "uid-g-2"), "n2": ("uid-g-0", "uid-g-2")},
    ),
    Case(
        "a gang with one protected member stays whole",
        {"n1": (G0, pod("low"))},
        {"n1": ("uid-low",)},
        (
            "pod ml/g-0 is not preempted: gang ml/g stays whole, and its member ml/g-9 may not be preempted "
            "(it is not preemptible)",
        ),
        members={
            "ml/g": (GangMember("n1", G0), GangMember("n2", pod("g-9", gang="ml/g", preemptible=False)))
        },
    ),
    Case(
        "the preemptor's own gang is never a victim",
        {"n1": (pod("mate", gang="ml/urgent"),)},
        {},
        (
            "pod ml/mate is not preempted: it is in ml/urgent's own gang",
            "node n1 is dropped: none of its proposed victims may be preempted",
        ),
    ),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_preempt_within_queue(case: Case) -> None:
    tree = QueueTree.build([gpu_queue("team-a", 8, min_runtime=60), gpu_queue("team-b", 8)])
    decision = preempt_within_queue(PREEMPTOR, case.proposed, case.members, tree=tree, now=NOW)
    assert dict(decision.victims) == case.victims
    if case.reasons:
        assert decision.reasons == case.reasons
    if case.companions is not None:
        assert dict(decision.companions) == case.companions
    for node, uids in decision.victims.items():
        assert uids, f"node {node} kept without a victim"


def test_without_a_tree_the_minimum_runtime_is_not_checked() -> None:
    decision = preempt_within_queue(PREEMPTOR, {"n1": (pod("young", started_at=NOW),)})
    assert dict(decision.victims) == {"n1": ("uid-young",)}
