"""The rule beside Kueue: a workload Kueue admitted is placed by phalanx and charged to none of its queues.

Kueue stamps ``kueue.x-k8s.io/podset`` on every pod of a workload it admits; such a pod's quota was
checked by its ClusterQueue. phalanx must not check it again (its default queue would hold a
non-preemptible one over quota 0, and a limit would hold any), must not count it in a queue's allocation
(double accounting), must not order it behind its own queues' groups, and must take no victim for it nor
offer it as one: preemption of admitted work is Kueue's.
"""

from __future__ import annotations

from scheduling.admission.flight import ReleasedBook
from scheduling.admission.queue_hold import AdmittedBook, hold_for_queue
from scheduling.admission.release import GateSettings, release
from scheduling.cluster.promises import PromiseBook
from scheduling.explain.queue_place import queue_place
from scheduling.model import KUEUE_PODSET_LABEL, Pod
from scheduling.preempt_session import narrow_victims
from scheduling.queues import QueueTree
from scheduling.queues.view import view_of
from scheduling.timestamps import seconds
from scheduling.topology import TopologyCache
from tests.builders import a_gang, a_node, a_pod, snapshot_of
from tests.scheduling.queues.builders import gpu_queue

T0 = "2026-01-01T00:00:00Z"
NOW = (seconds(T0) or 0.0) + 600.0
NODES = [a_node("n1").build(), a_node("n2").build()]  # 16 GPUs
LIMITED = [gpu_queue("default", limit=4)]
"""phalanx's default queue capped at 4 GPUs: what a Kueue-admitted job must not be held by."""


def kueue_member(name: str, gpus: int, *, group: str = "job", priority: int = 0) -> Pod:
    builder = a_pod(name).gpus(gpus).group(group).created(T0).priority(priority)
    return builder.label(KUEUE_PODSET_LABEL, "Worker").gated().build()


def test_a_kueue_admitted_gang_is_released_past_a_phalanx_queue_limit() -> None:
    pods = [kueue_member(f"w{i}", 8) for i in range(2)]
    snapshot = snapshot_of(NODES, pods, [a_gang("job", 2)], LIMITED)
    view = view_of(snapshot, PromiseBook())
    decision = release(
        snapshot, PromiseBook(), view, ReleasedBook(), TopologyCache(), now=NOW, settings=GateSettings()
    )
    assert [(r.group, r.reason) for r in decision.released] == [
        ("ml/job", "admitted by Kueue (its ClusterQueue holds the quota); fits now on 2 node(s) (n1, n2)")
    ]


def test_a_kueue_admitted_gang_still_waits_whole_for_room() -> None:
    pods = [kueue_member(f"w{i}", 8) for i in range(3)]  # 24 GPUs on 16
    snapshot = snapshot_of(NODES, pods, [a_gang("job", 3)], [])
    view = view_of(snapshot, PromiseBook())
    decision = release(
        snapshot, PromiseBook(), view, ReleasedBook(), TopologyCache(), now=NOW, settings=GateSettings()
    )
    assert decision.released == ()
    assert [k.group for k in decision.kept] == ["ml/job"]
    assert "can never be placed" in decision.kept[0].reason or "waits for room" in decision.kept[0].reason


def test_a_kueue_admitted_pod_charges_no_phalanx_queue_but_takes_its_capacity() -> None:
    running = [
        a_pod("k").gpus(8).on("n1", range(8)).label(KUEUE_PODSET_LABEL, "Worker").created(T0).build(),
        a_pod("p").gpus(4).on("n2", range(4)).queue("default").created(T0).build(),
    ]
    view = view_of(snapshot_of(NODES, running, [], LIMITED), PromiseBook())
    assert view.states["default"].allocated.gpus == 4
    assert view.capacity.gpus == 8  # 16 less the 8 Kueue's pod holds


def test_the_filters_queue_gate_holds_no_kueue_admitted_pod() -> None:
    """A pod beyond its queue's limit is held, unless Kueue admitted it."""
    mine = a_pod("mine").gpus(8).created(T0).build()
    theirs = a_pod("theirs").gpus(8).created(T0).label(KUEUE_PODSET_LABEL, "main").build()
    snapshot = snapshot_of(NODES, [mine, theirs], [], LIMITED)
    view = view_of(snapshot, PromiseBook())
    free = snapshot.free_total(PromiseBook())
    held = {
        pod.name: hold_for_queue(pod, snapshot, PromiseBook(), view, AdmittedBook(), now=NOW, free=free).held
        for pod in (mine, theirs)
    }
    assert held["theirs"] is None
    assert held["mine"] is not None and "limit" in held["mine"]


def test_preemption_takes_no_victim_for_kueue_and_none_of_kueues() -> None:
    victim_of_kueue = a_pod("kv").gpus(8).on("n1", range(8)).label(KUEUE_PODSET_LABEL, "main").build()
    mine = a_pod("low").gpus(8).on("n2", range(8)).priority(0).build()
    snapshot = snapshot_of(NODES, [victim_of_kueue, mine], [], [])
    tree = QueueTree.build(snapshot.queue_list())
    proposed = {"n1": ((victim_of_kueue.uid,), 0), "n2": ((mine.uid,), 0)}
    phalanx_pod = a_pod("high").gpus(8).priority(50).build()
    kept, _ = narrow_victims(phalanx_pod, proposed, snapshot, tree, now=NOW)
    assert set(kept) == {"n2"}, "a pod Kueue admitted was offered as phalanx's victim"
    kueue_pod = a_pod("khigh").gpus(8).priority(50).label(KUEUE_PODSET_LABEL, "main").build()
    kept, reasons = narrow_victims(kueue_pod, proposed, snapshot, tree, now=NOW)
    assert kept == {}
    assert "Kueue" in reasons[0]


def test_why_tells_a_kueue_admitted_pod_that_its_quota_is_kueues() -> None:
    pod = kueue_member("w0", 8)
    view = view_of(snapshot_of(NODES, [pod], [a_gang("job", 1)], LIMITED), PromiseBook())
    place = queue_place(pod, [pod], view, None)
    assert (place.queue, place.position, place.rule) == ("Kueue", None, None)
    assert place.sentence.startswith("admitted by Kueue")


def test_a_launcher_kueue_did_not_stamp_is_kueues_with_its_gang() -> None:
    """The MPI Operator v0.7 builds the launcher from its own template: only the workers carry the label."""
    launcher = a_pod("launcher").cpu(100).group("job").created(T0).gated().build()
    pods = [launcher, *(kueue_member(f"w{i}", 8) for i in range(2))]
    snapshot = snapshot_of(NODES, pods, [a_gang("job", 3)], LIMITED)
    view = view_of(snapshot, PromiseBook())
    assert view.pending == ()
    decision = release(
        snapshot, PromiseBook(), view, ReleasedBook(), TopologyCache(), now=NOW, settings=GateSettings()
    )
    assert [r.group for r in decision.released] == ["ml/job"]
    assert decision.released[0].reason.startswith("admitted by Kueue")
    assert len(decision.released[0].pods) == 3
