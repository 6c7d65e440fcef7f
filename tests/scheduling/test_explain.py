"""``scheduling.explain``: why a pod or gang waits, one scenario per case ``phalanx why`` must get right.

Three 8-GPU nodes, as on the test bed. Each scenario states the cause, the one-line verdict, every node
group (count and sentence) and the plan it would get, so a wrong rule, a wrong count or a wrong choice of
blocking group fails here.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import pytest

from scheduling.explain import Cause, ExplainError, PlacedPod, Target, WhatIf, explain
from scheduling.model import Node, Pod, PodGroup, Taint, Toleration
from scheduling.queues import Queue
from tests.builders import a_gang, a_node, a_pod, members, snapshot_of
from tests.scheduling.queues.builders import gpu_queue

NODES = (a_node("n1").build(), a_node("n2").build(), a_node("n3").build())
QUEUES = (gpu_queue("a", quota=8, limit=12), gpu_queue("b", quota=8), gpu_queue("c", quota=0, weight=2))
ALL = (0, 1, 2, 3, 4, 5, 6, 7)


def running(
    name: str, node: str, gpus: int, *, queue: str | None = None, priority: int = 0, first: int = 0
) -> Pod:
    pod = a_pod(name).gpus(gpus).priority(priority)
    return (pod.queue(queue) if queue else pod).on(node, range(first, first + gpus)).build()


def waiting(name: str, gpus: int, *, queue: str | None = None, priority: int = 0, created: str = "") -> Pod:
    pod = a_pod(name).gpus(gpus).priority(priority).created(created)
    return (pod.queue(queue) if queue else pod).build()


@dataclass(frozen=True)
class Scenario:
    pods: tuple[Pod, ...]
    target: Target
    cause: Cause
    verdict: str
    nodes: tuple[tuple[int, str], ...]
    what_if: WhatIf | None = None
    groups: tuple[PodGroup, ...] = ()
    queues: tuple[Queue, ...] = ()
    cluster: tuple[Node, ...] = NODES


P = Target("pod", "ml", "p")
# Another scheduler's pods (in no queue) hold 12 GPUs; gang ml/first of queue a (2 x 5 GPUs) fits the
# 12 free GPUs in all but not the nodes (8 and 4 free), so it waits at the head of queue a.
ELSEWHERE = tuple(
    replace(running(name, node, gpus), scheduler_name="other")
    for name, node, gpus in (("x1", "n1", 8), ("x2", "n2", 4))
)
FIRST = tuple(
    a_pod(f"first-{i}").gpus(5).group("first").queue("a").created("2026-01-01T00:00:00Z").build()
    for i in (0, 1)
)
GANG = Target("podgroup", "ml", "g")
TAINTED = (replace(NODES[0], taints=(Taint("gpu", "reserved", "NoSchedule"),)), *NODES[1:])
LABELLED = tuple(
    a_node(n).labels(**{"gpu-type": t}).build() for n, t in (("n1", "h100"), ("n2", "a100"), ("n3", "a100"))
)

SCENARIOS = {
    "too few GPUs anywhere: the smallest group whose finishing makes room is named": Scenario(
        (running("big1", "n1", 8), running("big2", "n2", 8), running("mid", "n3", 6), waiting("p", 4)),
        P,
        Cause.NO_CAPACITY,
        "pod ml/p waits for GPUs: it needs 4 GPUs on one node; 2 are free on the 3 nodes it may use; "
        "it fits once ml/mid finishes (6 GPUs)",
        (
            (2, "node(s) with too few free GPUs (0 free, pod needs 4)"),
            (1, "node(s) with too few free GPUs (2 free, pod needs 4)"),
        ),
        WhatIf(("ml/mid",), 6, (PlacedPod("p", "n3", (0, 1, 2, 3)),)),
    ),
    "fragmentation: enough GPUs in all, not on one node; ties broken by name": Scenario(
        (running("b", "n2", 4), running("a", "n1", 4), running("c", "n3", 4), waiting("p", 8)),
        P,
        Cause.FRAGMENTED,
        "pod ml/p waits for room in one place: it needs 8 GPUs on one node; 12 GPUs are free on the 3 nodes "
        "it may use, but at most 4 on one node; it fits once ml/a finishes (4 GPUs)",
        ((3, "node(s) with too few free GPUs (4 free, pod needs 8)"),),
        WhatIf(("ml/a",), 4, (PlacedPod("p", "n1", ALL),)),
    ),
    "a fragmented gang needs the fewest groups that make room for all its members": Scenario(
        (running("a", "n1", 4), running("b", "n2", 4), running("c", "n3", 2), *members("g", 2, 6)),
        GANG,
        Cause.FRAGMENTED,
        "gang ml/g waits for room in one place: it needs 12 GPUs for 2 pods (6 per pod); 14 GPUs are free "
        "on the 3 nodes it may use, but at most 6 on one node; it fits once ml/a finishes (4 GPUs)",
        (
            (2, "node(s) with too few free GPUs (4 free, pod needs 6)"),
            (1, "node(s) with room for one member now (6 GPUs)"),
        ),
        WhatIf(
            ("ml/a",),
            4,
            # largest first, ties by name, each where it leaves least room: w0 to n3's 6 free, w1 to n1
            (PlacedPod("w0", "n3", (2, 3, 4, 5, 6, 7)), PlacedPod("w1", "n1", (0, 1, 2, 3, 4, 5))),
        ),
        groups=(a_gang("g", 2),),
    ),
    "queue limit": Scenario(
        (running("a1", "n1", 8, queue="a"), running("a2", "n2", 4, queue="a"), waiting("p", 4, queue="a")),
        P,
        Cause.QUEUE_LIMIT,
        "pod ml/p is held by its queue: "
        "queue a: over its GPU limit (limit 12, allocated 12, this job needs 4)",
        (
            (1, "node(s) with too few free GPUs (0 free, pod needs 4)"),
            (2, "node(s) with room for the pod now"),
        ),
        queues=QUEUES,
    ),
    "non-preemptible over quota": Scenario(
        (running("np", "n1", 8, queue="b", priority=100), waiting("p", 4, queue="b", priority=100)),
        P,
        Cause.NON_PREEMPTIBLE_QUOTA,
        "pod ml/p is held by its queue: queue b: non-preemptible jobs run only within the queue's quota "
        "(GPU quota 8, 8 held by non-preemptible jobs, this job needs 4)",
        (
            (1, "node(s) with too few free GPUs (0 free, pod needs 4)"),
            (2, "node(s) with room for the pod now"),
        ),
        queues=QUEUES,
    ),
    "a group ahead in the fair order keeps its room": Scenario(
        (*ELSEWHERE, *FIRST, waiting("p", 4, queue="a", created="2026-01-01T00:01:00Z")),
        P,
        Cause.HELD_FOR_AHEAD,
        "pod ml/p is held by its queue: queue a: the 12 GPUs free are needed by 1 group(s) ahead of this "
        "one (ml/first of queue a need 10); this job needs 4",
        (
            (1, "node(s) with too few free GPUs (0 free, pod needs 4)"),
            (2, "node(s) with room for the pod now"),
        ),
        groups=(a_gang("first", 2),),
        queues=QUEUES,
    ),
    "no node passes kube-scheduler's own filters: capacity first, the queue rule after": Scenario(
        (
            *ELSEWHERE,
            replace(running("x3", "n3", 2), scheduler_name="other"),
            *FIRST,
            waiting("p", 8, queue="a", created="2026-01-01T00:01:00Z"),
        ),
        P,
        Cause.FRAGMENTED,
        "pod ml/p waits for room in one place: it needs 8 GPUs on one node; 10 GPUs are free on the 3 nodes "
        "it may use, but at most 6 on one node; it fits once ml/x3 finishes (2 GPUs); its queue would hold "
        "it too: queue a: the 10 GPUs free are needed by 1 group(s) ahead of this one (ml/first of queue a "
        "need 10); this job needs 8",
        (
            (1, "node(s) with too few free GPUs (0 free, pod needs 8)"),
            (1, "node(s) with too few free GPUs (4 free, pod needs 8)"),
            (1, "node(s) with too few free GPUs (6 free, pod needs 8)"),
        ),
        WhatIf(("ml/x3",), 2, (PlacedPod("p", "n3", ALL),)),
        groups=(a_gang("first", 2),),
        queues=QUEUES,
    ),
    "an incomplete gang": Scenario(
        tuple(members("g", 2, 4)),
        GANG,
        Cause.GANG_INCOMPLETE,
        "gang ml/g waits for members: 2 of 3 pods exist (minMember 3)",
        ((3, "node(s) with room for one member now (4 GPUs)"),),
        groups=(a_gang("g", 3),),
    ),
    "an untolerated taint excludes the only node with room": Scenario(
        (running("f2", "n2", 8), running("f3", "n3", 8), waiting("p", 4)),
        P,
        Cause.EXCLUDED,
        "pod ml/p waits: the nodes with room for it are excluded by kube-scheduler's filters "
        "(1 node with taint gpu=reserved:NoSchedule the pod does not tolerate)",
        (
            (2, "node(s) with too few free GPUs (0 free, pod needs 4)"),
            (1, "node(s) with taint gpu=reserved:NoSchedule the pod does not tolerate"),
        ),
        cluster=TAINTED,
    ),
    "a node selector excludes the nodes with room": Scenario(
        (running("f1", "n1", 8), replace(waiting("p", 4), node_selector={"gpu-type": "h100"})),
        P,
        Cause.EXCLUDED,
        "pod ml/p waits: the nodes with room for it are excluded by kube-scheduler's filters "
        "(2 nodes not matching the pod's node selector gpu-type=h100)",
        (
            (2, "node(s) not matching the pod's node selector gpu-type=h100"),
            (1, "node(s) with too few free GPUs (0 free, pod needs 4)"),
        ),
        cluster=LABELLED,
    ),
    "a taint that excludes a full node is reported, but capacity is the cause": Scenario(
        (running("f1", "n1", 8), running("f2", "n2", 8), running("f3", "n3", 6), waiting("p", 4)),
        P,
        Cause.NO_CAPACITY,
        "pod ml/p waits for GPUs: it needs 4 GPUs on one node; 2 are free on the 2 nodes it may use; "
        "it fits once ml/f3 finishes (6 GPUs)",
        (
            (1, "node(s) with taint gpu=reserved:NoSchedule the pod does not tolerate"),
            (1, "node(s) with too few free GPUs (0 free, pod needs 4)"),
            (1, "node(s) with too few free GPUs (2 free, pod needs 4)"),
        ),
        WhatIf(("ml/f3",), 6, (PlacedPod("p", "n3", (0, 1, 2, 3)),)),
        cluster=TAINTED,
    ),
    "a tolerated taint does not exclude": Scenario(
        (
            running("f2", "n2", 8),
            running("f3", "n3", 8),
            replace(waiting("p", 4), tolerations=(Toleration("gpu", "Exists"),)),
        ),
        P,
        Cause.FITS_NOW,
        "pod ml/p fits now: phalanx's filter accepts 1 node(s), n1 ranked best; kube-scheduler places it at "
        "its next attempt",
        (
            (2, "node(s) with too few free GPUs (0 free, pod needs 4)"),
            (1, "node(s) with room for the pod now"),
        ),
        WhatIf((), 0, (PlacedPod("p", "n1", (0, 1, 2, 3)),)),
        cluster=TAINTED,
    ),
    "more GPUs than any node has": Scenario(
        (waiting("p", 16),),
        P,
        Cause.TOO_LARGE,
        "pod ml/p cannot run on the nodes it may use: a pod needs 16 GPUs on one node and the largest of "
        "3 such nodes has 8",
        ((3, "node(s) with only 8 GPUs in total (pod needs 16 on one node)"),),
    ),
    "not ready and cordoned nodes": Scenario(
        (running("f1", "n1", 8), waiting("p", 4)),
        P,
        Cause.NO_CAPACITY,
        "pod ml/p waits for GPUs: it needs 4 GPUs on one node; 0 are free on the 1 node it may use; "
        "it fits once ml/f1 finishes (8 GPUs)",
        (
            (1, "node(s) cordoned (spec.unschedulable: an admin keeps new pods off)"),
            (1, "node(s) not Ready (the kubelet stopped reporting or reports the node unhealthy)"),
            (1, "node(s) with too few free GPUs (0 free, pod needs 4)"),
        ),
        WhatIf(("ml/f1",), 8, (PlacedPod("p", "n1", (0, 1, 2, 3)),)),
        cluster=(NODES[0], a_node("n2").not_ready().build(), a_node("n3").cordoned().build()),
    ),
    "no set of up to three running groups makes room": Scenario(
        (
            *(running(f"s{i}", "n1", 2, first=2 * i) for i in range(4)),
            running("f2", "n2", 8),
            running("f3", "n3", 8),
            replace(waiting("p", 8), node_selector={"gpu-type": "h100"}),
        ),
        P,
        Cause.NO_CAPACITY,
        "pod ml/p waits for GPUs: it needs 8 GPUs on one node; 0 are free on the 1 node it may use; "
        "no running group finishing (up to 3) makes room for it",
        (
            (2, "node(s) not matching the pod's node selector gpu-type=h100"),
            (1, "node(s) with too few free GPUs (0 free, pod needs 8)"),
        ),
        cluster=LABELLED,
    ),
}


@pytest.mark.parametrize("scenario", SCENARIOS.values(), ids=SCENARIOS.keys())
def test_why_a_pod_or_gang_waits(scenario: Scenario) -> None:
    snapshot = snapshot_of(scenario.cluster, scenario.pods, scenario.groups, scenario.queues)
    said = explain(snapshot, scenario.target, now=100.0)
    assert said.cause is scenario.cause
    assert said.verdict == scenario.verdict
    assert [(g.count, g.message) for g in said.nodes] == list(scenario.nodes)
    assert sum(g.count for g in said.nodes) == len(scenario.cluster)
    assert said.what_if == scenario.what_if


def test_the_place_in_the_fair_order_and_the_rule_that_holds_the_group() -> None:
    scenario = SCENARIOS["a group ahead in the fair order keeps its room"]
    snapshot = snapshot_of(NODES, scenario.pods, scenario.groups, QUEUES)
    place = explain(snapshot, P, now=100.0).queue
    assert place is not None
    assert (place.queue, place.position, place.pending, place.in_queue) == ("a", 2, 2, 2)
    assert (place.ahead, place.holders, place.rule) == (("ml/first",), ("ml/first",), "held_for_ahead")
    assert place.sentence.startswith("queue a: the 12 GPUs free are needed by 1 group(s) ahead")
    # 12 GPUs to divide; a wants 14, capped by its limit 12: it deserves its quota 8, and the 4 left too
    assert [
        (s.resource, s.quota, s.limit, s.deserved, s.fair_share, s.allocated, s.requested)
        for s in place.shares
    ] == [("nvidia.com/gpu", 8, 12, 8, 12, 0, 4)]
    assert place.standing == "within deserved quota"


def test_a_queue_limit_shows_the_limit_and_what_the_queue_holds() -> None:
    scenario = SCENARIOS["queue limit"]
    place = explain(snapshot_of(NODES, scenario.pods, queues=QUEUES), P, now=100.0).queue
    assert place is not None
    assert (place.rule, place.position, place.standing) == ("limit", 1, "over fair share")
    assert [(s.limit, s.allocated, s.requested) for s in place.shares] == [(12, 12, 4)]


def test_a_pod_in_an_unknown_queue_is_held_with_the_queues_sentence() -> None:
    snapshot = snapshot_of(NODES, [waiting("p", 1, queue="nope")], queues=QUEUES)
    said = explain(snapshot, P, now=100.0)
    assert said.cause is Cause.UNKNOWN_QUEUE
    assert said.queue is not None and (said.queue.queue, said.queue.rule) == ("nope", "unknown_queue")
    assert said.verdict == f"pod ml/p is held: {said.queue.sentence}"
    assert "nope" in said.queue.sentence


GANG_OF_3 = (a_gang("g", 3),)
HALF_BOUND = (
    a_pod("w0").gpus(4).group("g").on("n1", range(4)).build(),
    *members("g", 2, 4, prefix="v"),
)

# (pods, PodGroups, target) -> (cause, verdict, gang counts)
GANGS = {
    "an incomplete gang asked by a member": (
        tuple(members("g", 2, 4)),
        GANG_OF_3,
        Target("pod", "ml", "w0"),
        (
            Cause.GANG_INCOMPLETE,
            "pod ml/w0 of gang ml/g waits for members: 2 of 3 pods exist (minMember 3)",
            (3, 2, 0, 2, True),
        ),
    ),
    "a gang whose PodGroup is missing": (
        tuple(members("g", 2, 4)),
        (),
        Target("pod", "ml", "w1"),
        (
            Cause.NO_PODGROUP,
            "pod ml/w1 of gang ml/g waits for its PodGroup ml/g to be created",
            (0, 2, 0, 2, False),
        ),
    ),
    "a finished member is no member: the extender's cache drops it": (
        (
            a_pod("w0").gpus(4).group("g").on("n1", range(4)).phase("Succeeded").build(),
            *members("g", 2, 4)[1:],
        ),
        (a_gang("g", 2),),
        GANG,
        (
            Cause.GANG_INCOMPLETE,
            "gang ml/g waits for members: 1 of 2 pods exist (minMember 2)",
            (2, 1, 0, 1, True),
        ),
    ),
    "a PodGroup without pods": (
        (),
        GANG_OF_3,
        GANG,
        (Cause.GANG_INCOMPLETE, "gang ml/g waits for members: 0 of 3 pods exist", (3, 0, 0, 0, True)),
    ),
    "a complete gang, one member bound, fits now": (
        HALF_BOUND,
        GANG_OF_3,
        GANG,
        (
            Cause.FITS_NOW,
            "gang ml/g fits now: phalanx plans its 2 waiting pod(s) on n1, n2; "
            "kube-scheduler places it at its next attempt",
            (3, 3, 1, 2, True),
        ),
    ),
}


@pytest.mark.parametrize(("pods", "groups", "target", "expected"), GANGS.values(), ids=GANGS.keys())
def test_a_gangs_members_against_its_min_member(
    pods: tuple[Pod, ...],
    groups: tuple[PodGroup, ...],
    target: Target,
    expected: tuple[Cause, str, tuple[int, int, int, int, bool]],
) -> None:
    said = explain(snapshot_of(NODES, pods, groups), target, now=100.0)
    gang = said.gang
    assert gang is not None
    assert (
        said.cause,
        said.verdict,
        (gang.min_member, gang.present, gang.bound, gang.waiting, gang.podgroup),
    ) == expected


def test_a_gang_that_fits_gets_the_planners_plan_and_shows_its_bound_members() -> None:
    said = explain(snapshot_of(NODES, HALF_BOUND, GANG_OF_3), GANG, now=100.0)
    assert said.bound == (PlacedPod("w0", "n1", (0, 1, 2, 3)),)
    assert said.what_if == WhatIf(
        (), 0, (PlacedPod("v0", "n1", (4, 5, 6, 7)), PlacedPod("v1", "n2", (0, 1, 2, 3)))
    )
    assert said.filter_message == "gang ml/g: 2 pods reserved on 2 nodes (n1, n2)"


OTHERS = replace(waiting("o", 1), scheduler_name="default-scheduler")
SETTLED = {
    "a bound pod: where and which GPUs": (
        (a_pod("p").gpus(4).on("n2", (1, 3, 5, 7)).build(),),
        P,
        Cause.BOUND,
        "pod ml/p is bound to node n2 with GPUs 1,3,5,7 (phase Running)",
    ),
    "a bound pod without recorded indices": (
        (a_pod("p").gpus(2).on("n2").build(),),
        P,
        Cause.BOUND,
        "pod ml/p is bound to node n2 with 2 GPUs (indices not recorded) (phase Running)",
    ),
    "a pod of another scheduler": (
        (OTHERS,),
        Target("pod", "ml", "o"),
        Cause.NOT_PHALANX,
        "pod ml/o is not phalanx's: its spec.schedulerName is default-scheduler, and phalanx places only "
        "pods with schedulerName phalanx; ask that scheduler (kubectl describe pod)",
    ),
    "a finished pod": (
        (a_pod("p").gpus(1).on("n1", [0]).phase("Succeeded").build(),),
        P,
        Cause.FINISHED,
        "pod ml/p has finished (Succeeded), ran on node n1 with GPUs 0",
    ),
    "a pod being deleted": (
        (a_pod("p").gpus(1).on("n1", [0]).terminating().build(),),
        P,
        Cause.TERMINATING,
        "pod ml/p is being deleted on node n1 with GPUs 0",
    ),
    "a gang all bound": (
        (
            a_pod("w0").gpus(8).group("g").on("n3", ALL).build(),
            a_pod("w1").gpus(8).group("g").on("n1", ALL).build(),
        ),
        GANG,
        Cause.BOUND,
        "gang ml/g is bound: all 2 live pods run, on n1, n3",
    ),
}


@pytest.mark.parametrize(("pods", "target", "cause", "verdict"), SETTLED.values(), ids=SETTLED.keys())
def test_a_pod_not_waiting_for_phalanx_is_said_so(
    pods: tuple[Pod, ...], target: Target, cause: Cause, verdict: str
) -> None:
    said = explain(snapshot_of(NODES, pods, (a_gang("g", 2),)), target, now=100.0)
    assert (said.cause, said.verdict) == (cause, verdict)
    assert said.nodes == () and said.queue is None


@pytest.mark.parametrize(
    ("target", "error"),
    [
        (
            Target("pod", "ml", "ghost"),
            "pod ml/ghost not found: the cluster has no pod of that name in that namespace",
        ),
        (
            Target("podgroup", "ml", "ghost"),
            "podgroup ml/ghost not found: no PodGroup of that name and no pod labelled "
            "scheduling.x-k8s.io/pod-group=ghost in namespace ml",
        ),
    ],
    ids=["pod", "podgroup"],
)
def test_an_unknown_target_is_a_clear_error(target: Target, error: str) -> None:
    with pytest.raises(ExplainError) as raised:
        explain(snapshot_of(NODES, [waiting("p", 1)]), target, now=100.0)
    assert str(raised.value) == error


@pytest.mark.parametrize(
    ("text", "namespace", "expected"),
    [
        ("ml/p", "default", Target("pod", "ml", "p")),
        ("p", "ml", Target("pod", "ml", "p")),
        ("pod/p", "ml", Target("pod", "ml", "p")),
        ("podgroup/g", "ml", Target("podgroup", "ml", "g")),
        ("pg/team/g", "ml", Target("podgroup", "team", "g")),
    ],
)
def test_targets_read_as_kubectl_names_them(text: str, namespace: str, expected: Target) -> None:
    assert Target.parse(text, namespace) == expected


@pytest.mark.parametrize("text", ["", "a/b/c", "ml/", "podgroup/"])
def test_unreadable_targets_are_refused(text: str) -> None:
    with pytest.raises(ExplainError, match="cannot read"):
        Target.parse(text)


def test_a_group_kube_scheduler_never_sends_to_phalanx_holds_no_room() -> None:
    """The demo's case: a 16-GPU pod fits no 8-GPU node, so kube-scheduler never asks phalanx about it.

    The extender counts a group ahead only while kube-scheduler tries it: the gang behind waits for a
    node with room for its members, not for the 16-GPU pod (the answer before this rule was "held for
    groups ahead", which the extender's own events contradicted).
    """
    busy = tuple(running(f"job-{i}", f"n{i + 1}", 5) for i in range(3))  # 17 free: 3, 3, 3 and 8
    huge = waiting("huge", 16, created="2026-01-01T00:00:00Z")
    gang = tuple(
        a_pod(f"llm-{i}").gpus(8).group("llm").created("2026-01-02T00:00:00Z").build() for i in range(2)
    )
    snapshot = snapshot_of((*NODES, a_node("n4").build()), (*busy, huge, *gang), (a_gang("llm", 2),))
    said = explain(snapshot, Target("podgroup", "ml", "llm"), now=100.0)
    assert said.cause is Cause.FRAGMENTED, said.verdict


def test_a_gated_pod_says_what_the_release_pass_decides_for_it() -> None:
    over = replace(waiting("p", 8, queue="a"), gates=("phalanx.io/admission",))
    held = [running(f"r{i}", "n1", 2, queue="a", first=2 * i) for i in range(3)]  # queue a holds 6 of 12
    snapshot = snapshot_of(NODES, [*held, over], queues=QUEUES)
    said = explain(snapshot, P, now=0.0)
    assert said.admission == (
        "kept gated by the placement manager: "
        "queue a: over its GPU limit (limit 12, allocated 6, this job needs 8)"
    )
    fits = replace(waiting("p", 4, queue="a"), gates=("phalanx.io/admission",))
    said = explain(snapshot_of(NODES, [*held, fits], queues=QUEUES), P, now=0.0)
    assert said.admission == "released by the next pass: queue a: admitted; fits now on 1 node(s) (n2)"
    ungated = explain(snapshot_of(NODES, [*held, waiting("p", 4, queue="a")], queues=QUEUES), P, now=0.0)
    assert ungated.admission is None
