"""Plans carried on pods (``GateSettings.plan_on_pod``): what a pass writes, keeps and plans again."""

from __future__ import annotations

from dataclasses import replace

from scheduling.admission.flight import ReleasedBook
from scheduling.admission.outcome import PodPlan
from scheduling.model import Pod
from tests.builders import a_gang, a_node, a_pod
from tests.scheduling.admission.test_release import (
    NOW,
    PATIENT,
    T0,
    TWO_QUEUES,
    decide,
    gang_members,
    gpu_pod,
    running,
)

CARRIED = replace(PATIENT, plan_on_pod=True)
ONE_NODE = [a_node("n1").build()]


def in_flight(name: str, gpus: int, plan: tuple[str, tuple[int, ...]] | None) -> Pod:
    """A pod released by an earlier pass and not bound yet, carrying ``plan``."""
    return replace(a_pod(name).gpus(gpus).created(T0).build(), plan=plan)


def flying(*names: str) -> ReleasedBook:
    return ReleasedBook().with_released([f"ml/{n}" for n in names], NOW - 1.0)


def gpus_of(plans: tuple[PodPlan, ...]) -> list[int]:
    return sorted(g for p in plans for g in p.gpus)


def test_each_placed_pod_carries_its_node_and_gpus_and_nothing_is_nominated() -> None:
    pods = [gpu_pod("solo", 2), *gang_members("g", 2, 4)]
    two = [a_node("n1").build(), a_node("n2").build()]
    decision = decide(two, pods, groups=[a_gang("g", 2)], settings=CARRIED)
    by_group = {r.group: r for r in decision.released}
    assert set(by_group) == {"ml/solo", "ml/g"}
    assert all(r.nodes == () for r in decision.released)
    assert [p.pod for p in by_group["ml/g"].plans] == ["ml/g-0", "ml/g-1"]
    plans = [*by_group["ml/g"].plans, *by_group["ml/solo"].plans]
    assert [len(p.gpus) for p in plans] == [4, 4, 2]
    taken = [(p.node, g) for p in plans for g in p.gpus]
    assert len(taken) == len(set(taken)), "two plans of one pass share a GPU"


def test_without_carried_plans_a_pod_on_its_own_gets_no_plan() -> None:
    decision = decide(ONE_NODE, [gpu_pod("solo", 2)])
    assert [r.plans for r in decision.released] == [()]


def test_a_plan_in_flight_that_still_holds_is_kept_and_its_gpus_go_to_nobody_else() -> None:
    flight = in_flight("early", 2, ("n1", (4, 5)))
    decision = decide(ONE_NODE, [flight, gpu_pod("late", 6)], book=flying("early"), settings=CARRIED)
    assert decision.replanned == ()
    (late,) = decision.released
    assert late.plans[0].node == "n1"
    assert not set(late.plans[0].gpus) & {4, 5}
    assert gpus_of(late.plans) == [0, 1, 2, 3, 6, 7]


def test_a_plan_in_flight_whose_gpus_were_taken_is_planned_again() -> None:
    """Something bound GPUs 0 and 1 since the plan was made: the pod gets two others."""
    flight = in_flight("early", 2, ("n1", (0, 1)))
    taker = running("taker", "n1", range(2))
    decision = decide(ONE_NODE, [flight, taker], book=flying("early"), settings=CARRIED)
    (again,) = decision.replanned
    assert again.why == "its plan on n1 no longer held: a planned GPU or the room was taken since"
    assert again.pod == "ml/early"
    assert again.node == "n1"
    assert len(again.gpus) == 2
    assert not set(again.gpus) & {0, 1}


def test_a_pod_in_flight_without_a_plan_is_given_one() -> None:
    """Released before plans were carried (or by another rule): planned as it is counted."""
    decision = decide(ONE_NODE, [in_flight("early", 2, None)], book=flying("early"), settings=CARRIED)
    assert [(p.pod, p.node, len(p.gpus)) for p in decision.replanned] == [("ml/early", "n1", 2)]


def test_a_plan_naming_a_node_that_is_gone_is_planned_again_elsewhere() -> None:
    flight = in_flight("early", 2, ("gone", (0, 1)))
    decision = decide(ONE_NODE, [flight], book=flying("early"), settings=CARRIED)
    assert [(p.pod, p.node) for p in decision.replanned] == [("ml/early", "n1")]


def test_a_plan_past_the_in_flight_window_still_holds_its_gpus() -> None:
    """Released two minutes ago (kube-scheduler paused, say): out of the budget, not of the room.

    kube-scheduler will bind it on its plan whenever it tries, so nobody else is planned there.
    """
    old = replace(PATIENT, plan_on_pod=True, release_ttl=60.0)
    flight = in_flight("early", 2, ("n1", (0, 1)))
    book = ReleasedBook().with_released(["ml/early"], NOW - 120.0)
    decision = decide(ONE_NODE, [flight, gpu_pod("late", 6)], book=book, settings=old)
    assert decision.replanned == ()
    (late,) = decision.released
    assert gpus_of(late.plans) == [2, 3, 4, 5, 6, 7]


def test_a_broken_plan_past_the_in_flight_window_is_planned_again() -> None:
    old = replace(PATIENT, plan_on_pod=True, release_ttl=60.0)
    flight = in_flight("early", 2, ("n1", (0, 1)))
    book = ReleasedBook().with_released(["ml/early"], NOW - 120.0)
    decision = decide(ONE_NODE, [flight, running("taker", "n1", range(2))], book=book, settings=old)
    assert [(p.pod, p.node) for p in decision.replanned] == [("ml/early", "n1")]
    assert not set(decision.replanned[0].gpus) & {0, 1}


def turned_down(name: str, gpus: int, plan: tuple[str, tuple[int, ...]], sealed_ago: float) -> Pod:
    """In flight on ``plan``, sealed ``sealed_ago`` s before ``NOW``; kube-scheduler's last try failed."""
    return replace(in_flight(name, gpus, plan), planned_at=NOW - sealed_ago, unschedulable=True)


TWO_NODES = [a_node("n1").build(), a_node("n2").build()]


def test_a_plan_kube_scheduler_keeps_turning_down_is_planned_on_another_node_and_remembered() -> None:
    """A host port taken on n1, say: the core sees room there, kube-scheduler does not."""
    refused = turned_down("early", 2, ("n1", (0, 1)), sealed_ago=CARRIED.plan_refused_after + 1)
    decision = decide(TWO_NODES, [refused], book=flying("early"), settings=CARRIED)
    assert [(p.pod, p.node) for p in decision.replanned] == [("ml/early", "n2")]
    assert decision.replanned[0].why == (
        "kube-scheduler kept turning its plan on n1 down, for what phalanx does not model"
    )
    assert decision.in_flight.refused == {"ml/early": frozenset({"n1"})}
    # Next pass: the new plan (n2) is kube-scheduler's to try; n1 is not planned for the pod again.
    on_n2 = turned_down("early", 2, ("n2", (0, 1)), sealed_ago=1.0)
    again = decide(TWO_NODES, [on_n2], book=decision.in_flight, settings=CARRIED)
    assert again.replanned == (), "a fresh plan is held until kube-scheduler had time to try it"
    assert again.in_flight.refused == {"ml/early": frozenset({"n1"})}


def test_a_plan_turned_down_before_kube_scheduler_could_try_it_is_held() -> None:
    """The pod's condition still tells of a former plan's try: too early to blame this one."""
    fresh = turned_down("early", 2, ("n1", (0, 1)), sealed_ago=CARRIED.plan_refused_after - 1)
    decision = decide(TWO_NODES, [fresh], book=flying("early"), settings=CARRIED)
    assert (decision.replanned, dict(decision.in_flight.refused)) == ((), {})


def test_a_pod_refused_everywhere_is_planned_as_if_new() -> None:
    """Its refusals are forgotten: what kube-scheduler refused (a port, a volume) may be free by now."""
    book = flying("early").with_refused({"ml/early": frozenset({"n1"})})
    refused = turned_down("early", 2, ("n2", (0, 1)), sealed_ago=CARRIED.plan_refused_after + 1)
    decision = decide(TWO_NODES, [refused], book=book, settings=CARRIED)
    assert len(decision.replanned) == 1
    assert dict(decision.in_flight.refused) == {}


def test_refusals_are_forgotten_once_the_pod_is_bound_or_gone() -> None:
    book = flying("early").with_refused({"ml/early": frozenset({"n1"})})
    bound = running("early", "n2", range(2))
    decision = decide(TWO_NODES, [bound], book=book, settings=CARRIED)
    assert dict(decision.in_flight.refused) == {}


def test_without_carried_plans_nothing_is_ever_counted_refused() -> None:
    """The extender's mode: kube-scheduler looks at every node itself; there is no plan to blame."""
    refused = turned_down("early", 2, ("n1", (0, 1)), sealed_ago=1000.0)
    decision = decide(TWO_NODES, [refused], book=flying("early"))
    assert (decision.replanned, dict(decision.in_flight.refused)) == ((), {})


def test_a_pod_released_to_preempt_carries_a_plan_on_the_gpus_its_victims_hold() -> None:
    """kube-scheduler's own preemption then evicts, on the plan's node, the pods holding those GPUs."""
    low = [running("low-a", "n1", range(4), queue="a"), running("low-b", "n1", range(4, 8), queue="a")]
    decision = decide(
        ONE_NODE, [*low, gpu_pod("high", 4, queue="a", priority=10)], queues=TWO_QUEUES, settings=CARRIED
    )
    (high,) = decision.released
    assert high.reason == "queue a: admitted; may preempt 2 lower-priority pod(s) on node n1"
    (plan,) = high.plans
    assert (plan.pod, plan.node, len(plan.gpus)) == ("ml/high", "n1", 4)
    held = {"low-a": set(range(4)), "low-b": set(range(4, 8))}
    assert [name for name, gpus in held.items() if gpus & set(plan.gpus)], "the plan names victims' GPUs"


def test_a_preempting_pod_kube_scheduler_nominated_waits_for_its_victims_and_is_not_refused() -> None:
    """Victims take their grace period to go: the pod stays turned down, nominated to its plan's node."""
    waiting = replace(
        turned_down("high", 4, ("n1", (0, 1, 2, 3)), sealed_ago=CARRIED.plan_refused_after + 30),
        nominated_node="n1",
    )
    victim = replace(running("low", "n1", range(4), queue="a"), terminating=True)
    decision = decide(TWO_NODES, [waiting, victim], book=flying("high"), settings=CARRIED)
    assert (decision.replanned, dict(decision.in_flight.refused)) == ((), {}), "kept as it is"
    not_nominated = replace(waiting, nominated_node=None)
    decision = decide(TWO_NODES, [not_nominated, victim], book=flying("high"), settings=CARRIED)
    assert decision.replanned != (), "without the nomination, a plan whose GPUs are held is made again"


def test_a_pod_planned_again_never_takes_a_plan_that_still_holds() -> None:
    """Every plan that holds is held before any is made again, whatever the groups' order.

    ``ml/a``'s plan was broken by a bind; ``ml/b``'s (a later key) still holds. Planning ``ml/a`` again
    on GPUs ``ml/b`` was promised would break ``ml/b``'s plan in turn, and kube-scheduler's try of it.
    """
    broken = in_flight("a", 2, ("n1", (0, 1)))
    holds = in_flight("b", 2, ("n1", (2, 3)))
    taker = running("taker", "n1", range(2))
    decision = decide(ONE_NODE, [broken, holds, taker], book=flying("a", "b"), settings=CARRIED)
    (again,) = decision.replanned
    assert again.pod == "ml/a"
    assert not set(again.gpus) & {0, 1, 2, 3}
