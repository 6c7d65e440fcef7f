from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from scheduling.queues.preemption import GangMember, Preemptor, VictimPod, preempt_within_queue
from scheduling.queues.queue_tree import QueueTree
from scheduling.queues.surplus import GangSize
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
    leader: bool = False,
) -> VictimPod:
    return VictimPod(f"uid-{name}", f"ml/{name}", queue, priority, preemptible, gang, started_at, leader)


@dataclass(frozen=True)
class Case:
    name: str
    proposed: dict[str, tuple[VictimPod, ...]]
    victims: dict[str, tuple[str, ...]]
    reasons: tuple[str, ...] = ()
    members: dict[str, tuple[GangMember, ...]] = field(default_factory=dict)
    companions: dict[str, tuple[str, ...]] | None = None
    sizes: dict[str, GangSize] = field(default_factory=dict)


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


# An elastic MPIJob: launcher + 6 workers running, minMember 5 (launcher + 4 workers): 2 above its minimum.
# n1: launcher, w0, w1, w2; n2: w3, w4; n3: w5.
LAUNCHER = pod("job-launcher", gang="ml/job", leader=True)
W = [pod(f"job-w{i}", gang="ml/job") for i in range(6)]
JOB = {
    "ml/job": (
        GangMember("n1", LAUNCHER),
        *(GangMember("n1", W[i]) for i in range(3)),
        *(GangMember("n2", W[i]) for i in (3, 4)),
        GangMember("n3", W[5]),
    )
}
ABOVE_MIN = {"ml/job": GangSize(7, 5)}
JOB_ON_N1 = ("uid-job-launcher", "uid-job-w0", "uid-job-w1", "uid-job-w2")
YOUNG_W3 = pod("job-w3", gang="ml/job", started_at=NOW - 30)
GANG_G = {"ml/g": (GangMember("n3", G0), GangMember("n1", G1))}

SURPLUS_CASES = [
    Case(
        "a member above the gang's minimum goes alone: nothing added, no companions",
        {"n3": (W[5],)},
        {"n3": ("uid-job-w5",)},
        ("pod ml/job-w5 goes alone: gang ml/job runs 7 members, 2 above its minMember 5",),
        members=JOB,
        companions={"n3": ()},
        sizes=ABOVE_MIN,
    ),
    Case(
        "as many members on one node as the surplus go alone",
        {"n2": (W[3], W[4])},
        {"n2": ("uid-job-w3", "uid-job-w4")},
        (
            "pod ml/job-w3 goes alone: gang ml/job runs 7 members, 2 above its minMember 5",
            "pod ml/job-w4 goes alone: gang ml/job runs 7 members, 2 above its minMember 5",
        ),
        members=JOB,
        companions={"n2": ()},
        sizes=ABOVE_MIN,
    ),
    Case(
        "more members on one node than the surplus: the gang goes whole, as before",
        {"n1": (W[0], W[1], W[2])},
        {"n1": JOB_ON_N1},
        members=JOB,
        companions={"n1": ("uid-job-w3", "uid-job-w4", "uid-job-w5")},
        sizes=ABOVE_MIN,
    ),
    Case(
        "the leader never goes alone: its gang goes whole",
        {"n1": (LAUNCHER,)},
        {"n1": JOB_ON_N1},
        members=JOB,
        companions={"n1": ("uid-job-w3", "uid-job-w4", "uid-job-w5")},
        sizes=ABOVE_MIN,
    ),
    Case(
        "a gang at its minMember goes whole",
        {"n3": (W[5],)},
        {"n3": ("uid-job-w5",)},
        members=JOB,
        companions={"n3": (*JOB_ON_N1, "uid-job-w3", "uid-job-w4")},
        sizes={"ml/job": GangSize(7, 7)},
    ),
    Case(
        "a gang without a PodGroup has no surplus: it goes whole, as before",
        {"n3": (W[5],)},
        {"n3": ("uid-job-w5",)},
        members=JOB,
        companions={"n3": (*JOB_ON_N1, "uid-job-w3", "uid-job-w4")},
    ),
    Case(
        "nodes that need only surplus members or pods on their own are kept; a whole-gang node is dropped",
        {"n1": (pod("low"),), "n2": (W[3],), "n3": (G0,)},
        {"n1": ("uid-low",), "n2": ("uid-job-w3",)},
        (
            "pod ml/job-w3 goes alone: gang ml/job runs 7 members, 2 above its minMember 5",
            "pod ml/g-1 on node n1 goes too if node n3 is chosen: gang ml/g is evicted whole",
            "node n3 is dropped: it would evict gang ml/g whole, while node n1 needs only pods on their "
            "own or members above their gang's minimum",
        ),
        members={**JOB, **GANG_G},
        companions={"n1": (), "n2": ()},
        sizes={**ABOVE_MIN, "ml/g": GangSize(2, 2)},
    ),
    Case(
        "surplus is per node: the node that would take the gang whole is dropped for the one that would not",
        {"n1": (W[0], W[1], W[2]), "n2": (W[3], W[4])},
        {"n2": ("uid-job-w3", "uid-job-w4")},
        members=JOB,
        companions={"n2": ()},
        sizes=ABOVE_MIN,
    ),
    Case(
        "when every node would evict a whole gang, all stay candidates",
        {"n1": (W[0], W[1], W[2]), "n3": (G0,)},
        {"n1": JOB_ON_N1, "n3": ("uid-g-0",)},
        members={**JOB, **GANG_G},
        sizes={**ABOVE_MIN, "ml/g": GangSize(2, 2)},
    ),
    Case(
        "surplus members still pass the per-pod checks: one too young keeps its node's other member",
        {"n2": (YOUNG_W3, W[4])},
        {},
        (
            "pod ml/job-w3 is not preempted: it has run 30s of its queue's minimum runtime 60s",
            "pod ml/job-w4 is not preempted: gang ml/job stays whole, and its member ml/job-w3 may not be "
            "preempted (it has run 30s of its queue's minimum runtime 60s)",
            "node n2 is dropped: none of its proposed victims may be preempted",
        ),
        members={"ml/job": (GangMember("n2", YOUNG_W3), GangMember("n2", W[4]), GangMember("n3", W[5]))},
        sizes=ABOVE_MIN,
    ),
    Case(
        "a surplus member of equal priority stays",
        {"n3": (pod("job-w5", gang="ml/job", priority=50),)},
        {},
        (
            "pod ml/job-w5 is not preempted: its priority 50 is not lower than ml/urgent's 50",
            "node n3 is dropped: none of its proposed victims may be preempted",
        ),
        sizes=ABOVE_MIN,
    ),
    Case(
        "a surplus member of another queue stays",
        {"n3": (pod("job-w5", gang="ml/job", queue="team-b"),)},
        {},
        (
            "pod ml/job-w5 is not preempted: it is in queue team-b, not team-a; "
            "priority preempts only within a queue",
            "node n3 is dropped: none of its proposed victims may be preempted",
        ),
        sizes=ABOVE_MIN,
    ),
]


@pytest.mark.parametrize("case", CASES + SURPLUS_CASES, ids=lambda c: c.name)
def test_preempt_within_queue(case: Case) -> None:
    tree = QueueTree.build([gpu_queue("team-a", 8, min_runtime=60), gpu_queue("team-b", 8)])
    decision = preempt_within_queue(
        PREEMPTOR, case.proposed, case.members, sizes=case.sizes, tree=tree, now=NOW
    )
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
