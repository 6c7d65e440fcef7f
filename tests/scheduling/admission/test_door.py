"""The door: which pods are let in ungated as they are created, and why the others take the gate."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import pytest

from scheduling.admission.door import WALK_LIMIT, decide_at_door
from scheduling.admission.flight import ReleasedBook
from scheduling.admission.release import Released, release
from scheduling.cluster.promises import PromiseBook
from scheduling.cluster.snapshot import with_pods
from scheduling.model import Node, Pod
from scheduling.queues import Queue
from scheduling.queues.view import view_of
from scheduling.topology import TopologyCache
from tests.builders import a_node, a_pod, snapshot_of
from tests.scheduling.admission.test_release import NOW, PATIENT, T0, TWO_NODES, TWO_QUEUES, gpu_pod, running
from tests.scheduling.queues.builders import gpu_queue


def arriving(name: str, gpus: int, *, queue: str | None = None) -> Pod:
    """A pod as the gate webhook's review brings it: ungated, no UID of its own, no creation time."""
    builder = a_pod(name).gpus(gpus)
    pod = (builder.queue(queue) if queue else builder).build()
    return replace(pod, uid=f"review-{name}", created="")


def door(
    pod: Pod,
    pods: Sequence[Pod] = (),
    *,
    nodes: Sequence[Node] = TWO_NODES,
    queues: Sequence[Queue] = (),
    let_in: Sequence[Pod] = (),
    book: ReleasedBook = ReleasedBook(),  # noqa: B008 (an immutable value)
) -> Released | str:
    base = snapshot_of(nodes, pods, (), queues)
    view = view_of(base, PromiseBook())
    return decide_at_door(
        with_pods(base, let_in), PromiseBook(), view, book, pod, TopologyCache(), now=NOW, settings=PATIENT
    )


def test_a_pod_with_room_on_a_quiet_cluster_is_let_in_with_the_pass_s_sentence() -> None:
    answer = door(arriving("solo", 2), [running("busy", "n1", range(8))])
    assert isinstance(answer, Released)
    assert (answer.group, answer.pods) == ("ml/solo", ("ml/solo",))
    assert answer.reason == "queue default: admitted; fits now on 1 node(s) (n2)"


@pytest.mark.parametrize(
    ("pod", "pods", "queues", "why"),
    [
        pytest.param(
            arriving("big", 8, queue="a"),
            [],
            [gpu_queue("a", limit=4)],
            "queue a: over its GPU limit (limit 4, allocated 0, this job needs 8)",
            id="its queue's rules",
        ),
        pytest.param(
            arriving("big", 8),
            [running("r1", "n1", range(4)), running("r2", "n2", range(4))],
            [],
            "waits for room on one node: no node has room for ml/big now (8 GPUs)",
            id="room on no node",
        ),
        pytest.param(
            arriving("late", 1, queue="b"),
            [gpu_pod("early", 8, queue="a")],
            TWO_QUEUES,
            "the pass would release ml/early too: it decides",
            id="the pass would release another group",
        ),
        pytest.param(
            arriving("late", 1),
            [gpu_pod(f"w{i}", 64) for i in range(WALK_LIMIT + 1)],
            [],
            f"{WALK_LIMIT + 1} groups wait gated: the release pass decides in the fair order",
            id="a backlog waits",
        ),
        pytest.param(
            arriving("young", 4, queue="a"),
            [running("r1", "n1", range(8)), running("r2", "n2", range(4)), gpu_pod("old", 4, queue="a")],
            TWO_QUEUES,
            "waits for room: needs 4 GPUs, 0 free after 1 group(s) ahead",
            id="an older group of its queue goes first",
        ),
        pytest.param(
            replace(arriving("m", 1), group="g"),
            [],
            [],
            "a gang's member: the gang is released whole",
            id="a gang's member",
        ),
        pytest.param(
            replace(arriving("x", 1), name=""), [], [], "no name yet (generateName)", id="generateName"
        ),
        pytest.param(
            replace(arriving("q", 1), gates=("example.com/quota",)),
            [],
            [],
            "it carries scheduling gates (example.com/quota)",
            id="another gate",
        ),
        pytest.param(
            replace(arriving("w", 1), labels={"training.kubeflow.org/job-name": "j"}),
            [],
            [],
            "its admission is another party's (Kueue, an MPIJob)",
            id="an MPIJob's pod",
        ),
        pytest.param(
            replace(arriving("k", 1), labels={"kueue.x-k8s.io/queue-name": "lq"}),
            [],
            [],
            "its admission is another party's (Kueue, an MPIJob)",
            id="a Kueue pod",
        ),
        pytest.param(
            replace(arriving("d", 1), scheduler_name="default-scheduler"),
            [],
            [],
            "not a pod of scheduler phalanx",
            id="another scheduler",
        ),
        pytest.param(
            replace(arriving("lost", 1), labels={"phalanx.io/queue": "nowhere"}),
            [],
            TWO_QUEUES,
            "its queue: queue nowhere does not exist",
            id="no such queue",
        ),
    ],
)
def test_a_pod_takes_the_gate_with_the_reason(
    pod: Pod, pods: list[Pod], queues: list[Queue], why: str
) -> None:
    assert door(pod, pods, queues=queues) == why


def test_a_pod_let_in_and_not_yet_seen_holds_its_room_for_the_next_one() -> None:
    # One node, 8 GPUs: the first 8-GPU pod is let in; the cache has not seen it yet, but it counts.
    one = [a_node("n1").build()]
    first = arriving("first", 8)
    assert isinstance(door(first, nodes=one), Released)
    book = ReleasedBook().with_released(["ml/first"], NOW)
    assert door(arriving("second", 8), nodes=one, let_in=[first], book=book) == (
        "waits for room: needs 8 GPUs, 0 free after 1 group(s) ahead"
    )


def test_a_pod_let_in_counts_against_its_queue_until_bound() -> None:
    first = arriving("first", 4, queue="a")
    book = ReleasedBook().with_released(["ml/first"], NOW)
    answer = door(
        arriving("second", 4, queue="a"), queues=[gpu_queue("a", limit=6)], let_in=[first], book=book
    )
    assert answer == "queue a: over its GPU limit (limit 6, allocated 4, this job needs 4)"


def test_the_door_and_the_pass_decide_alike() -> None:
    # Whatever the door says of a pod, the pass, given the same pod gated, says the same.
    cases = [
        (arriving("fits", 4), [running("r", "n1", range(8))]),
        (arriving("full", 8), [running("r1", "n1", range(4)), running("r2", "n2", range(4))]),
        (arriving("cpu", 0), [running("r1", "n1", range(8)), running("r2", "n2", range(8))]),
    ]
    for pod, pods in cases:
        answer = door(pod, pods)
        gated = replace(pod, gates=("phalanx.io/admission",), created=T0)
        snapshot = snapshot_of(TWO_NODES, [*pods, gated], (), ())
        decision = release(
            snapshot,
            PromiseBook(),
            view_of(snapshot, PromiseBook()),
            ReleasedBook(),
            TopologyCache(),
            now=NOW,
            settings=PATIENT,
        )
        by_pass = decision.released[0] if decision.released else decision.kept[0].reason
        assert answer == by_pass, pod.name


def test_a_pod_goes_in_past_a_group_kept_for_room_as_the_pass_would_let_it() -> None:
    # n1 has 4 GPUs free: the 8-GPU pod waits for room, and the pass would release a 1-GPU pod past it.
    pods = [running("r1", "n1", range(4)), running("r2", "n2", range(8)), gpu_pod("big", 8)]
    answer = door(arriving("small", 1), pods)
    assert isinstance(answer, Released)
    assert answer.reason == "queue default: admitted; fits now on 1 node(s) (n1)"


def test_a_starving_group_keeps_its_nodes_from_the_pod_at_the_door() -> None:
    # The 8-GPU pod has waited past starve_after: it keeps n1, where it will start, from those behind it.
    pods = [running("r1", "n1", range(4)), running("r2", "n2", range(8)), gpu_pod("big", 8)]
    base = snapshot_of(TWO_NODES, pods, (), ())
    hungry = replace(PATIENT, starve_after=60.0)
    answer = decide_at_door(
        base,
        PromiseBook(),
        view_of(base, PromiseBook()),
        ReleasedBook(),
        arriving("small", 1),
        TopologyCache(),
        now=NOW,
        settings=hungry,
    )
    assert isinstance(answer, str) and "keeps 1 node(s) with 4 free GPU(s)" in answer, answer


def test_a_pod_named_as_one_that_exists_takes_the_gate() -> None:
    # Its creation fails (AlreadyExists): letting it in would count a pod that never comes, and the
    # event meant for it would land on the pod that has the name.
    existing = running("solo", "n1", range(2))
    assert door(arriving("solo", 1), [existing]) == (
        "a pod of that name exists (its creation fails, or waits for it to be gone)"
    )
