"""A pass over a random cluster plus one hostile object decides for every other object as without it.

The adapter hands the core well-formed objects or explicit refused markers (``kubeio.cluster_cache``):
a node advertising more GPUs than phalanx models arrives with ``gpu_problem`` and no GPUs, a Queue it
cannot read with ``problem``, a worse Queue is set aside by the core. For each, on random clusters of
nodes, running and waiting pods and queues, the filter (every pending pod, every candidate node), the
queue view and the release pass of the admission gates decide for every other object exactly what they
decide without the hostile one, and the hostile object gets its own reason.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from scheduling.admission.flight import ReleasedBook
from scheduling.admission.queue_hold import AdmittedBook
from scheduling.admission.release import GateSettings, release
from scheduling.cluster.promises import PromiseBook
from scheduling.cluster.snapshot import ClusterSnapshot
from scheduling.model import MAX_NODE_GPUS, Node, Pod, Resources
from scheduling.queues import PendingGroup, Queue, QueueShare, ResourceQuota
from scheduling.queues.view import view_of
from scheduling.reasons import Reason
from scheduling.session import FilterInput, SessionSettings, filter_pod
from scheduling.timestamps import seconds
from scheduling.topology import TopologyCache
from tests.builders import a_node, a_pod, snapshot_of

T0 = "2026-01-01T00:00:00Z"
NOW = (seconds(T0) or 0.0) + 60.0
QUEUES = [
    Queue("a", gpu=ResourceQuota(8, 1), created=T0),
    Queue("b", gpu=ResourceQuota(4, 2, 12), created=T0),
]
REFUSED = Node(
    "hostile",
    Resources(milli_cpu=64000, memory=2**40, gpus=0),
    gpu_problem=f"node hostile advertises {2**63 - 1} nvidia.com/gpu, more than phalanx models "
    f"({MAX_NODE_GPUS} per node); phalanx places nothing there and counts none of its capacity",
)
"""A node as the adapter hands over one that advertised 2^63-1 GPUs."""

HOSTILE_QUEUES = [
    Queue("bad", "nowhere", gpu=ResourceQuota(64, 1), created="2026-06-01T00:00:00Z"),
    Queue("bad", "a", gpu=ResourceQuota(9, 1), created="2026-06-01T00:00:00Z"),  # does not fit a's 8
    Queue("bad", problem="spec.resources.nvidia.com/gpu.quota: '9999999999999999999Ei' is more than ..."),
]


@st.composite
def clusters(draw: st.DrawFn) -> tuple[list[Node], list[Pod]]:
    """2-4 nodes of 8 GPUs, some pods running on them, some waiting (gated), in queues a, b, default."""
    nodes = [a_node(f"n{i}").build() for i in range(draw(st.integers(2, 4)))]
    pods: list[Pod] = []
    for n, node in enumerate(nodes):
        used = 0
        for k in range(draw(st.integers(0, 3))):
            gpus = draw(st.integers(1, 4))
            if used + gpus > 8:
                break
            queue = draw(st.sampled_from(["a", "b", None]))
            builder = a_pod(f"run-{n}-{k}").gpus(gpus).on(node.name, range(used, used + gpus)).created(T0)
            pods.append((builder.queue(queue) if queue else builder).build())
            used += gpus
    for k in range(draw(st.integers(1, 5))):
        queue = draw(st.sampled_from(["a", "b", "bad", None]))
        builder = a_pod(f"wait-{k}").gpus(draw(st.integers(0, 8))).created(f"2026-01-01T00:00:{k:02d}Z")
        pods.append((builder.queue(queue) if queue else builder).gated().build())
    return nodes, pods


@dataclass
class Decisions:
    """What the passes decided: per pending pod its filter outcome, the queue view, the release pass."""

    filter: dict[str, tuple[Any, ...]]
    capacity: Resources
    shares: dict[str, QueueShare]
    pending: tuple[PendingGroup, ...]
    released: list[tuple[str, tuple[str, ...]]]
    kept: list[tuple[str, str]]


def decisions(snapshot: ClusterSnapshot, candidates: tuple[str, ...]) -> Decisions:
    """Every pending pod's filter outcome on ``candidates``, the queue view, and the release pass."""
    view = view_of(snapshot, PromiseBook())
    outcomes: dict[str, tuple[Any, ...]] = {}
    for pod in snapshot.all_pods():
        if pod.node_name is not None:
            continue
        asked = FilterInput(pod, candidates, snapshot, PromiseBook(), view, AdmittedBook(), NOW)
        outcome = filter_pod(asked, topologies=TopologyCache(), settings=SessionSettings())
        outcomes[pod.key] = (
            outcome.feasible,
            dict(outcome.rejected),
            outcome.verdict,
            outcome.promises.by_uid,
        )
    gates = release(
        snapshot, PromiseBook(), view, ReleasedBook(), TopologyCache(), now=NOW, settings=GateSettings()
    )
    return Decisions(
        outcomes,
        view.capacity,
        {name: view.shares[name] for name in view.tree.queues},
        view.pending,
        [(r.group, tuple(r.pods)) for r in gates.released],
        [(k.group, k.reason) for k in gates.kept],
    )


@settings(max_examples=60, deadline=None)
@given(cluster=clusters())
def test_a_node_refused_for_its_gpu_count_changes_no_decision_about_anything_else(
    cluster: tuple[list[Node], list[Pod]],
) -> None:
    nodes, pods = cluster
    names = tuple(n.name for n in nodes)
    without = decisions(snapshot_of(nodes, pods, (), QUEUES), names)
    hostile = snapshot_of([*nodes, REFUSED], pods, (), QUEUES)
    assert decisions(hostile, names) == without
    # Offered the hostile node as well, every pod gets the same answer on the others, and a GPU pod the
    # hostile node's own reason.
    view = view_of(hostile, PromiseBook())
    for pod in hostile.all_pods():
        if pod.node_name is not None:
            continue
        asked = FilterInput(pod, (*names, "hostile"), hostile, PromiseBook(), view, AdmittedBook(), NOW)
        outcome = filter_pod(asked, topologies=TopologyCache(), settings=SessionSettings())
        feasible, rejected, _, _ = without.filter[pod.key]
        assert tuple(n for n in outcome.feasible if n != "hostile") == feasible
        assert {n: r for n, r in outcome.rejected.items() if n != "hostile"} == rejected
        if outcome.verdict is None:
            assert outcome.rejected["hostile"].reason is Reason.GPUS_REFUSED


@settings(max_examples=60, deadline=None)
@given(cluster=clusters(), bad=st.sampled_from(HOSTILE_QUEUES))
def test_a_queue_set_aside_changes_no_decision_about_anything_else(
    cluster: tuple[list[Node], list[Pod]], bad: Queue
) -> None:
    nodes, pods = cluster
    names = tuple(n.name for n in nodes)
    without = decisions(snapshot_of(nodes, pods, (), QUEUES), names)
    with_bad = decisions(snapshot_of(nodes, pods, (), [*QUEUES, bad]), names)
    bad_pods = {p.key for p in pods if p.labels.get("phalanx.io/queue") == "bad"}
    for key in bad_pods:  # the bad queue's own pods are turned down with its reason instead of "no queue"
        without.filter.pop(key)
        _, _, verdict, _ = with_bad.filter.pop(key)
        assert verdict is not None and "the queue is set aside until that is fixed" in verdict.message

    # The release pass releases them for the extender to turn down, as it releases pods of a queue that
    # does not exist; what it decides for every other group is the same.
    def others(decided: list[tuple[str, Any]]) -> list[tuple[str, Any]]:
        return [d for d in decided if d[0] not in bad_pods]

    assert others(with_bad.kept) == others(without.kept)
    assert others(with_bad.released) == others(without.released)
    assert (with_bad.filter, with_bad.capacity, with_bad.shares, with_bad.pending) == (
        without.filter,
        without.capacity,
        without.shares,
        without.pending,
    )


def test_the_hostile_node_alone_turns_every_pod_down_with_its_own_reason() -> None:
    for pod in (a_pod("g").gpus(1).build(), a_pod("c").cpu(500).build()):
        snapshot = snapshot_of([REFUSED], [pod], ())
        asked = FilterInput(pod, ("hostile",), snapshot, PromiseBook(), None, AdmittedBook(), NOW)
        outcome = filter_pod(asked, topologies=TopologyCache(), settings=SessionSettings())
        assert outcome.feasible == ()
        assert outcome.rejected["hostile"].message == (
            "node(s) advertising more nvidia.com/gpu than phalanx models (64 per node; see its events)"
        )
        assert view_of(snapshot, PromiseBook()).capacity == Resources(), "none of its capacity counts"


def test_a_released_pod_of_a_queue_set_aside_holds_no_room_for_the_groups_behind_it() -> None:
    """It was released only so that the extender turns it down with its queue's reason: it never binds.

    Counted in flight, it held the room it asked for until the release TTL (60 s): on the test bed a new
    elastic worker waited 53 s beside free GPUs for it.
    """
    full = a_pod("full").gpus(7).on("n0", range(7)).queue("a").created(T0).build()
    lost = a_pod("lost").gpus(1).queue("bad").created(T0).build()  # released a moment ago, unbound
    waiting = a_pod("next").gpus(1).queue("a").created(T0).gated().build()
    snapshot = snapshot_of([a_node("n0").build()], [full, lost, waiting], (), [*QUEUES, HOSTILE_QUEUES[0]])
    view = view_of(snapshot, PromiseBook())
    assert "ml/lost" in view.misplaced
    book = ReleasedBook().with_released(["ml/lost"], NOW - 5)
    decision = release(snapshot, PromiseBook(), view, book, TopologyCache(), now=NOW, settings=GateSettings())
    assert [r.group for r in decision.released] == ["ml/next"], decision.kept
