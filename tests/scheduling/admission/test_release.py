"""Which gated groups a pass releases, and the sentence for every group it keeps gated."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import replace

import pytest

from scheduling.admission.flight import ReleasedBook
from scheduling.admission.release import GateSettings, KeptRule, ReleaseDecision, release
from scheduling.cluster.promises import PromiseBook
from scheduling.model import Node, Pod, PodGroup
from scheduling.queues import Queue
from scheduling.queues.view import view_of
from scheduling.timestamps import seconds
from scheduling.topology import TopologyCache
from tests.builders import a_gang, a_node, a_pod, snapshot_of
from tests.scheduling.queues.builders import gpu_queue

T0 = "2026-01-01T00:00:00Z"
NOW = (seconds(T0) or 0.0) + 600.0  # every pod below was created 600 s before the pass, unless it says
TWO_NODES = [a_node("n1").build(), a_node("n2").build()]  # 16 GPUs
TWO_QUEUES = [gpu_queue("a", quota=8), gpu_queue("b", quota=8)]
PATIENT = GateSettings(starve_after=3600.0)
"""Nobody below has waited this long: starvation is tested on its own."""


def at(minute: int) -> str:
    """A creation time ``minute`` minutes after T0 (later is younger)."""
    return f"2026-01-01T00:{minute:02d}:00Z"


def decide(
    nodes: Sequence[Node],
    pods: Sequence[Pod],
    *,
    groups: Sequence[PodGroup] = (),
    queues: Sequence[Queue] = (),
    book: ReleasedBook = ReleasedBook(),  # noqa: B008 (an immutable value)
    settings: GateSettings = PATIENT,
    now: float = NOW,
) -> ReleaseDecision:
    snapshot = snapshot_of(nodes, pods, groups, queues)
    view = view_of(snapshot, PromiseBook())
    return release(snapshot, PromiseBook(), view, book, TopologyCache(), now=now, settings=settings)


def released(decision: ReleaseDecision) -> list[str]:
    return [r.group for r in decision.released]


def kept(decision: ReleaseDecision) -> dict[str, str]:
    return {k.group: k.reason for k in decision.kept}


def gpu_pod(name: str, gpus: int, *, queue: str | None = None, created: str = T0, priority: int = 0) -> Pod:
    builder = a_pod(name).gpus(gpus).created(created).priority(priority).gated()
    return (builder.queue(queue) if queue else builder).build()


def running(name: str, node: str, gpus: range, *, queue: str | None = None, priority: int = 0) -> Pod:
    builder = a_pod(name).gpus(len(gpus)).on(node, gpus).priority(priority).created(T0)
    return (builder.queue(queue) if queue else builder).build()


def gang_members(group: str, count: int, gpus: int, *, created: str = T0) -> list[Pod]:
    return [
        a_pod(f"{group}-{i}").gpus(gpus).group(group).created(created).gated().build() for i in range(count)
    ]


# -- fair order ------------------------------------------------------------------------------------


def test_groups_go_in_the_fair_order_not_by_age() -> None:
    # Queue a already holds its quota; b holds nothing, so b's younger group goes first, and takes the
    # last free node.
    pods = [
        running("a-run", "n1", range(8), queue="a"),
        gpu_pod("a-old", 8, queue="a", created=at(0)),
        gpu_pod("b-new", 8, queue="b", created=at(5)),
    ]
    decision = decide(TWO_NODES, pods, queues=TWO_QUEUES)
    assert released(decision) == ["ml/b-new"]
    assert kept(decision) == {"ml/a-old": "waits for room: needs 8 GPUs, 0 free after 1 group(s) ahead"}


def test_released_groups_are_listed_in_the_fair_order() -> None:
    pods = [
        running("a-run", "n1", range(4), queue="a"),
        gpu_pod("a-old", 4, queue="a", created=at(0)),
        gpu_pod("b-new", 4, queue="b", created=at(5)),
    ]
    assert released(decide(TWO_NODES, pods, queues=TWO_QUEUES)) == ["ml/b-new", "ml/a-old"]


# -- gangs -----------------------------------------------------------------------------------------


def test_a_gang_is_released_whole_with_every_gated_member() -> None:
    pods = gang_members("g", 3, 4)
    decision = decide(TWO_NODES, pods, groups=[a_gang("g", 2)])
    assert [(r.group, r.pods) for r in decision.released] == [("ml/g", ("ml/g-0", "ml/g-1", "ml/g-2"))]
    assert decision.released[0].reason == "queue default: admitted; fits now on 2 node(s) (n1, n2)"


ELASTIC_RUNNING = [
    a_pod(f"e-{i}").gpus(2).group("e").on("n1", range(2 * i, 2 * i + 2)).created(T0).build() for i in range(2)
]


@pytest.mark.parametrize(
    ("n2_busy", "outcome"),
    [
        (False, "released: queue default: admitted; fits now on 1 node(s) (n2)"),
        (
            True,
            "kept: waits for room on one node: gang ml/e: e-2 is pinned to n2, which has no room for it now",
        ),
    ],
    ids=["its node has room", "its node is full"],
)
def test_a_grown_elastic_gang_releases_its_new_worker_only_onto_its_pinned_node(
    n2_busy: bool, outcome: str
) -> None:
    grown = a_pod("e-2").gpus(2).group("e").pinned("n2").created(T0).gated().build()
    busy = [running("other", "n2", range(8))] if n2_busy else []
    decision = decide(TWO_NODES, [*ELASTIC_RUNNING, grown, *busy], groups=[a_gang("e", 2)])
    said = [f"released: {r.reason}" for r in decision.released] + [f"kept: {k.reason}" for k in decision.kept]
    assert said == [outcome]
    assert [r.pods for r in decision.released] == ([] if n2_busy else [("ml/e-2",)])


def test_a_gang_with_fewer_pods_than_min_member_stays_gated() -> None:
    decision = decide(TWO_NODES, gang_members("g", 3, 2), groups=[a_gang("g", 4)])
    assert released(decision) == []
    assert kept(decision) == {"ml/g": "gang ml/g: waiting for members: 3 of 4 pods exist"}


# -- the queue's rules -----------------------------------------------------------------------------

QUEUE_RULES = {
    "over the limit alone": (
        [gpu_queue("a", limit=4)],
        [gpu_pod("p", 8, queue="a")],
        {"ml/p": "queue a: over its GPU limit (limit 4, allocated 0, this job needs 8)"},
    ),
    "over the limit with a group released in the same pass": (
        [gpu_queue("a", limit=6)],
        [gpu_pod("p", 4, queue="a", created=at(0)), gpu_pod("q", 4, queue="a", created=at(1))],
        {"ml/q": "queue a: over its GPU limit (limit 6, allocated 4, this job needs 4)"},
    ),
    "non-preemptible beyond quota": (
        [gpu_queue("a", quota=4)],
        [gpu_pod("p", 8, queue="a", priority=100)],
        {
            "ml/p": "queue a: non-preemptible jobs run only within the queue's quota "
            "(GPU quota 4, 0 held by non-preemptible jobs, this job needs 8)"
        },
    ),
}


@pytest.mark.parametrize(("queues", "pods", "held"), QUEUE_RULES.values(), ids=QUEUE_RULES.keys())
def test_the_queue_rules_hold_a_group_with_their_sentence(
    queues: list[Queue], pods: list[Pod], held: dict[str, str]
) -> None:
    assert kept(decide(TWO_NODES, pods, queues=queues)) == held


def test_a_group_released_and_not_yet_bound_counts_against_its_queue() -> None:
    pods = [a_pod("out").gpus(4).queue("a").created(T0).build(), gpu_pod("p", 4, queue="a")]
    book = ReleasedBook().with_released(["ml/out"], NOW - 5)
    decision = decide(TWO_NODES, pods, queues=[gpu_queue("a", limit=6)], book=book)
    assert kept(decision) == {"ml/p": "queue a: over its GPU limit (limit 6, allocated 4, this job needs 4)"}


# -- room, fragmentation, work conservation, starvation --------------------------------------------


def test_room_in_total_but_on_no_node_keeps_the_group_and_others_still_go() -> None:
    pods = [
        running("r1", "n1", range(4)),
        running("r2", "n2", range(4)),
        gpu_pod("big", 8, created=at(0)),
        gpu_pod("small", 4, created=at(1)),
    ]
    decision = decide(TWO_NODES, pods)
    assert kept(decision) == {
        "ml/big": "waits for room on one node: no node has room for ml/big now (8 GPUs)"
    }
    assert released(decision) == ["ml/small"]


def test_only_the_nodes_its_node_selector_allows_count_for_a_pod() -> None:
    nodes = [a_node("n1").labels(pool="a").build(), a_node("n2").labels(pool="b").build()]
    pods = [running("r1", "n1", range(8)), replace(gpu_pod("p", 4), node_selector={"pool": "a"})]
    assert kept(decide(nodes, pods)) == {
        "ml/p": "waits for room on one node: no node has room for ml/p now (4 GPUs)"
    }


def test_a_pod_no_node_took_says_nothing_of_a_larger_one_allowed_other_nodes() -> None:
    nodes = [a_node("n1").labels(pool="a").build(), a_node("n2").labels(pool="b").build()]
    pods = [
        running("r1", "n1", range(8)),
        replace(gpu_pod("picky", 4, created=at(0)), node_selector={"pool": "a"}),
        gpu_pod("any", 8, created=at(1)),
    ]
    assert released(decide(nodes, pods)) == ["ml/any"]


def test_a_gang_split_over_nodes_is_planned_on_the_nodes_real_room() -> None:
    # 8 free GPUs, but 3 on one node and 5 on the other: two members of 4 do not fit.
    pods = [running("r1", "n1", range(5)), running("r2", "n2", range(3)), *gang_members("g", 2, 4)]
    decision = decide(TWO_NODES, pods, groups=[a_gang("g", 2)])
    assert released(decision) == []
    assert kept(decision)["ml/g"].startswith("waits for room on one node: gang ml/g: needs 8 GPUs for 2 pods")


# (how long the big gang has waited, the sentences kept, released)
STARVATION = {
    "a big gang that does not fit lets a small one behind it go": (
        at(5),
        {"ml/big": "waits for room: needs 16 GPUs, 8 free after 0 group(s) ahead"},
        ["ml/small"],
    ),
    "after starve_after the big gang keeps the nodes it will start on": (
        at(0),
        {
            "ml/big": "waits for room: needs 16 GPUs, 8 free after 0 group(s) ahead; it has waited 600s, "
            "so it keeps 2 node(s) (n1, n2) from the groups behind it",
            "ml/small": "waits for room: needs 4 GPUs, 0 free after 0 group(s) ahead; "
            "ml/big (waiting 600s) keeps 2 node(s) with 8 free GPU(s)",
        },
        [],
    ),
}


@pytest.mark.parametrize(("big_created", "held", "going"), STARVATION.values(), ids=STARVATION.keys())
def test_work_conservation_until_a_group_starves(
    big_created: str, held: dict[str, str], going: list[str]
) -> None:
    pods = [
        running("r1", "n1", range(8)),
        *gang_members("big", 2, 8, created=big_created),
        gpu_pod("small", 4, created=at(9)),
    ]
    decision = decide(TWO_NODES, pods, groups=[a_gang("big", 2)], settings=GateSettings(starve_after=300.0))
    assert (kept(decision), released(decision)) == (held, going)
    assert {k.group: k.rule for k in decision.kept} == {
        g: KeptRule.STARVING if g == "ml/small" else KeptRule.ROOM for g in held
    }


def test_a_starving_pod_keeps_the_node_it_will_start_on_and_the_others_serve_the_rest() -> None:
    """Before, it kept a count (8 GPUs "somewhere"), so a 2-GPU pod waited beside 2 GPUs it could not hurt."""
    pods = [
        running("r1", "n1", range(4)),
        running("r2", "n2", range(6)),
        gpu_pod("big", 8, created=at(0)),
        gpu_pod("small", 2, created=at(9)),
    ]
    decision = decide(TWO_NODES, pods, settings=GateSettings(starve_after=300.0))
    assert released(decision) == ["ml/small"]
    assert kept(decision) == {
        "ml/big": "waits for room: needs 8 GPUs, 6 free after 0 group(s) ahead; it has waited 600s, so it "
        "keeps 1 node(s) (n1) from the groups behind it"
    }
    assert decision.released[0].reason == "queue default: admitted; fits now on 1 node(s) (n2)"


@pytest.mark.parametrize(
    ("big", "why"),
    [
        (
            a_pod("big").gpus(9).created(at(0)).gated().build(),
            "a pod needs 9 GPUs on one node; the largest of the schedulable nodes offers 8",
        ),
        (
            a_pod("big").gpus(5000).created(at(0)).gated().build(),
            "a pod needs 5000 GPUs on one node; the largest of the schedulable nodes offers 8",
        ),
    ],
    ids=["9 GPUs on 8-GPU nodes", "5,000 GPUs"],
)
def test_a_pod_that_can_never_fit_keeps_nothing_and_says_so(big: Pod, why: str) -> None:
    """The hostile-input run: one such pod, past the starvation rule, kept every other GPU pod gated."""
    pods = [running("r1", "n1", range(4)), big, gpu_pod("small", 1, created=at(9))]
    decision = decide(TWO_NODES, pods, settings=GateSettings(starve_after=300.0))
    assert released(decision) == ["ml/small"]
    assert kept(decision) == {"ml/big": f"can never be placed on this cluster as it is: {why}"}
    assert [k.rule for k in decision.kept] == [KeptRule.NEVER]


def test_a_gang_that_fits_the_capacity_but_no_emptied_nodes_keeps_nothing() -> None:
    """Two 6-GPU members that may use an 8-GPU and a 4-GPU node: 12 GPUs, but never two 6s."""
    nodes = [
        a_node("n1").labels(pool="a").build(),
        a_node("n2").gpus(4).labels(pool="a").build(),
        a_node("n3").labels(pool="b").build(),
    ]
    members = [replace(p, node_selector={"pool": "a"}) for p in gang_members("big", 2, 6)]
    pods = [running("r1", "n1", range(8)), *members, gpu_pod("small", 4, created=at(9))]
    decision = decide(nodes, pods, groups=[a_gang("big", 2)], settings=GateSettings(starve_after=300.0))
    assert released(decision) == ["ml/small"]
    assert kept(decision) == {
        "ml/big": "can never be placed on this cluster as it is: even on emptied nodes: gang ml/big: needs "
        "12 GPUs for 2 pods (6 per pod); 12 free on 2 nodes, at most 8 on one node"
    }


def test_a_gang_only_its_nodes_cannot_hold_says_which_nodes() -> None:
    nodes = [a_node("n1").labels(pool="a").build(), a_node("n2").labels(pool="b").build()]
    members = [replace(p, node_selector={"pool": "a"}) for p in gang_members("big", 2, 8)]
    decision = decide(nodes, members, groups=[a_gang("big", 2)], settings=GateSettings(starve_after=300.0))
    assert kept(decision) == {
        "ml/big": "can never be placed on this cluster as it is: it needs 16 GPUs; the nodes it may use "
        "offer 8 in all"
    }


def test_idle_gpus_are_attributed_to_the_rule_that_keeps_them_idle() -> None:
    pods = [
        running("r1", "n1", range(4)),
        running("r2", "n2", range(6)),
        gpu_pod("big", 8, created=at(0)),
        gpu_pod("small", 2, created=at(9)),
        gpu_pod("odd", 3, created=at(10)),
    ]
    decision = decide(TWO_NODES, pods, settings=GateSettings(starve_after=300.0))
    assert released(decision) == ["ml/small"]
    assert dict(decision.idle) == {"kept_for_starving": 4}  # n1's 4 free GPUs wait for big; n2 is full


# -- released but not yet bound --------------------------------------------------------------------


def test_the_gpus_released_and_not_yet_bound_are_capped() -> None:
    pods = [gpu_pod(f"p{i}", 4, created=at(i)) for i in range(3)]
    decision = decide(TWO_NODES, pods, settings=GateSettings(max_unbound_gpus=8, starve_after=3600.0))
    assert released(decision) == ["ml/p0", "ml/p1"]
    assert kept(decision) == {
        "ml/p2": "waits its turn: 8 GPUs and 2 pod(s) released and not yet bound (at most 8 GPUs, 256 pods)"
    }
    assert dict(decision.in_flight.at) == {"ml/p0": NOW, "ml/p1": NOW}


def test_with_plans_carried_no_budget_keeps_a_group() -> None:
    """A pod released with its plan binds at kube-scheduler's first try: the queue's length costs nothing."""
    pods = [gpu_pod(f"p{i}", 4, created=at(i)) for i in range(3)]
    capped = GateSettings(max_unbound_gpus=8, starve_after=3600.0, plan_on_pod=True)
    assert released(decide(TWO_NODES, pods, settings=capped)) == ["ml/p0", "ml/p1", "ml/p2"]


def test_one_group_goes_when_none_is_in_flight_however_big() -> None:
    pods = gang_members("g", 2, 8)
    settings = GateSettings(max_unbound_gpus=8, starve_after=3600.0)
    assert released(decide(TWO_NODES, pods, groups=[a_gang("g", 2)], settings=settings)) == ["ml/g"]


# (when the unbound pod was released, by the book; None: it is not in the book; what the gated one hears)
IN_FLIGHT = {
    "a group released a moment ago takes its room": (
        NOW - 10,
        "waits for room: needs 16 GPUs, 8 free after 1 group(s) ahead",
    ),
    "one released longer than release_ttl ago does not": (NOW - 120, None),
    "one the book does not know is counted from now (another leader released it)": (
        None,
        "waits for room: needs 16 GPUs, 8 free after 1 group(s) ahead",
    ),
}


@pytest.mark.parametrize(("released_at", "held"), IN_FLIGHT.values(), ids=IN_FLIGHT.keys())
def test_groups_released_and_not_yet_bound_count_for_a_while(
    released_at: float | None, held: str | None
) -> None:
    pods = [a_pod("out").gpus(8).created(T0).build(), *gang_members("g", 2, 8)]
    book = ReleasedBook() if released_at is None else ReleasedBook().with_released(["ml/out"], released_at)
    settings = GateSettings(release_ttl=60.0, starve_after=3600.0)
    decision = decide(TWO_NODES, pods, groups=[a_gang("g", 2)], book=book, settings=settings)
    assert kept(decision).get("ml/g") == held
    assert "ml/out" in decision.in_flight.at  # it stays in the book until it is bound


# -- preemption ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("victim_queue", "outcome"),
    [
        pytest.param(
            "a", "queue a: admitted; may preempt 1 lower-priority pod(s) on node n1", id="own-queue"
        ),
        pytest.param("b", "waits for room: needs 8 GPUs, 0 free after 0 group(s) ahead", id="other-queue"),
    ],
)
def test_a_pod_that_can_start_by_preempting_in_its_queue_is_released(victim_queue: str, outcome: str) -> None:
    pods = [running("low", "n1", range(8), queue=victim_queue), gpu_pod("high", 8, queue="a", priority=10)]
    decision = decide([a_node("n1").build()], pods, queues=TWO_QUEUES)
    reasons = {r.group: r.reason for r in decision.released} | kept(decision)
    assert reasons == {"ml/high": outcome}


# -- what phalanx cannot reason about --------------------------------------------------------------

UNKNOWN = {
    "a queue label naming no queue": (
        a_pod("p").gpus(1).queue("nope").created(T0).gated().build(),
        True,
        "queue nope does not exist; released so that the extender turns it down with this reason",
    ),
    "a PodGroup missing past the grace": (
        a_pod("p").gpus(1).group("ghost").created(T0).gated().build(),
        True,
        "PodGroup ml/ghost does not exist; released so that the extender's gang filter says so",
    ),
    "a PodGroup missing a moment after the pod was created": (
        a_pod("p").gpus(1).group("ghost").created("2026-01-01T00:09:55Z").gated().build(),
        False,
        "waits for PodGroup ml/ghost to be created (5s so far, released after 10s)",
    ),
    "a pod of another scheduler": (
        replace(a_pod("p").gpus(1).created(T0).gated().build(), scheduler_name="other"),
        True,
        "not a pod of scheduler phalanx; released so that its own scheduler decides",
    ),
}


@pytest.mark.parametrize(("pod", "goes", "why"), UNKNOWN.values(), ids=UNKNOWN.keys())
def test_groups_phalanx_cannot_reason_about_are_released_with_why(pod: Pod, goes: bool, why: str) -> None:
    decision = decide(TWO_NODES, [pod])
    reasons = {r.group: r.reason for r in decision.released} if goes else kept(decision)
    assert why in reasons[pod.group_key or pod.key]
    assert released(decision) == ([pod.group_key or pod.key] if goes else [])


# -- determinism -----------------------------------------------------------------------------------


def test_the_same_facts_in_any_order_give_the_same_decision() -> None:
    pods = [
        running("a-run", "n1", range(4), queue="a"),
        *gang_members("g", 2, 4, created=at(2)),
        gpu_pod("a1", 4, queue="a", created=at(1)),
        gpu_pod("b1", 4, queue="b", created=at(1)),
        gpu_pod("b2", 2, queue="b", created=at(3)),
        gpu_pod("b3", 8, queue="b", created=at(3)),
    ]
    first = decide(TWO_NODES, pods, groups=[a_gang("g", 2)], queues=TWO_QUEUES)
    assert released(first) and kept(first)  # both lists are exercised
    for seed in range(5):
        shuffled = list(pods)
        random.Random(seed).shuffle(shuffled)
        nodes = list(reversed(TWO_NODES))
        assert decide(nodes, shuffled, groups=[a_gang("g", 2)], queues=list(reversed(TWO_QUEUES))) == first
