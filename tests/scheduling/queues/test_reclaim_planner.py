"""The reclaim planner: queue arithmetic's victim gangs, committed as one plan of pod evictions."""

from __future__ import annotations

from scheduling.cluster.promises import PromiseBook
from scheduling.plan import Eviction
from scheduling.queues import ReclaimOutcome
from scheduling.queues.reclaim_planner import plan_reclaim
from scheduling.queues.view import view_of
from scheduling.topology import TopologyCache
from tests.builders import a_node, snapshot_of
from tests.scheduling.queues.builders import gang_pods, gpu_queue

NODES = [a_node("n1").build(), a_node("n2").build()]  # 16 GPUs
QUEUES = [gpu_queue("a", quota=8), gpu_queue("b", quota=8)]


def test_each_bound_member_of_each_victim_is_one_eviction_with_its_gang_and_the_reason() -> None:
    pods = [*gang_pods("b1", "b", "n1"), *gang_pods("b2", "b", "n2"), *gang_pods("a1", "a", None)]
    snapshot = snapshot_of(NODES, pods, queues=QUEUES)
    reclaim = plan_reclaim(snapshot, view_of(snapshot, PromiseBook()), TopologyCache(), now=1000.0)

    assert [c.outcome for c in reclaim.choices] == [ReclaimOutcome.EVICT]
    (victim,) = reclaim.victims
    assert victim.gang in ("ml/b1", "ml/b2") and victim.queue == "b"
    members = [p for p in pods if p.group_key == victim.gang]
    assert reclaim.plan.actions == tuple(
        Eviction(
            p.key, p.uid, p.node_name or "", f"evicted whole with {victim.gang}: {victim.reason}", victim.gang
        )
        for p in sorted(members, key=lambda p: p.name)
    )
    assert victim.reason.startswith("reclaim: queue b is 8 GPUs over its fair share")


def test_a_gang_left_to_shrink_is_no_victim_and_nothing_starved_plans_nothing() -> None:
    pods = [*gang_pods("b1", "b", "n1"), *gang_pods("b2", "b", "n2"), *gang_pods("a1", "a", None)]
    snapshot = snapshot_of(NODES, pods, queues=QUEUES)
    view = view_of(snapshot, PromiseBook())
    shrinking = frozenset({"ml/b1", "ml/b2"})
    assert plan_reclaim(snapshot, view, TopologyCache(), now=1000.0, shrinking=shrinking).plan.actions == ()

    calm = snapshot_of(NODES, pods[:4], queues=QUEUES)
    reclaim = plan_reclaim(calm, view_of(calm, PromiseBook()), TopologyCache(), now=1000.0)
    assert reclaim.choices == () and reclaim.plan.actions == ()
