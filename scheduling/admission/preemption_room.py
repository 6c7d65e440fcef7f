"""Whether a gated pod on its own could start by priority preemption inside its own queue.

Gating a pod must not switch off kube-scheduler's priority preemption: a pod that no node has room for,
but that would fit once lower-priority pods of its own queue are preempted, is released so that
kube-scheduler can preempt for it (``scheduling.admission.release``, rule 6). Which victims are allowed is
the extender's own rule (``scheduling.preempt_session.narrow_victims``), so both agree.
"""

from __future__ import annotations

from collections.abc import Mapping

from scheduling.cluster.snapshot import ClusterSnapshot
from scheduling.cluster.statement import Statement
from scheduling.model import Pod
from scheduling.preempt_session import narrow_victims
from scheduling.queues import QUEUE_LABEL, QueueError, QueueTree


def preemption_room(
    pod: Pod,
    snapshot: ClusterSnapshot,
    work: Statement,
    tree: QueueTree,
    running: Mapping[str, tuple[Pod, ...]],
    *,
    now: float,
) -> tuple[str, int] | None:
    """A node where ``pod`` fits once the victims ``narrow_victims`` allows there are gone, and how many.

    Args:
        pod: the gated pod on its own.
        snapshot: the cluster now.
        work: the pass's working copy (left as it was: every trial is rolled back).
        tree: the queue tree.
        running: by leaf queue, its running pods of scheduler ``phalanx`` (the candidates).
        now: the caller's clock.
    """
    try:
        queue = tree.workload_queue(pod.labels.get(QUEUE_LABEL))
    except QueueError:
        return None
    proposed: dict[str, tuple[tuple[str, ...], int]] = {}
    for other in running.get(queue, ()):
        if other.priority >= pod.priority or other.node_name is None:
            continue
        uids, _ = proposed.get(other.node_name, ((), 0))
        proposed[other.node_name] = ((*uids, other.uid), 0)
    if not proposed:
        return None
    kept, _ = narrow_victims(pod, proposed, snapshot, tree, now=now)
    for node in sorted(kept):
        mark = work.checkpoint()
        victims = [v for uid in kept[node][0] if (v := snapshot.pod_by_uid(uid)) is not None]
        for victim in victims:
            work.evict(victim, f"preempted for {pod.key}")
        room = work.room(node)
        fits = room is not None and room.fits(pod)
        work.rollback(mark)
        if fits:
            return node, len(victims)
    return None


def queue_of(pod: Pod, tree: QueueTree) -> str | None:
    """The leaf queue ``pod`` runs in, or ``None`` when its label names none or Kueue owns its quota."""
    if pod.quota_by_kueue:
        return None
    try:
        return tree.workload_queue(pod.labels.get(QUEUE_LABEL))
    except QueueError:
        return None
