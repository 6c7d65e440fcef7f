"""Whether a gated pod on its own could start by priority preemption inside its own queue.

Gating a pod must not switch off kube-scheduler's priority preemption: a pod that no node has room for,
but that would fit once lower-priority pods of its own queue are preempted, is released so that
kube-scheduler can preempt for it (``scheduling.admission.release``, rule 6). Which victims are allowed is
the extender's own rule (``scheduling.preempt_session.narrow_victims``), so both agree.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from scheduling.admission.outcome import PodPlan
from scheduling.cluster.snapshot import ClusterSnapshot
from scheduling.cluster.statement import Statement
from scheduling.gang.gang_planner import GangPlan, plan_gang
from scheduling.model import Pod
from scheduling.preempt_session import narrow_victims
from scheduling.queues import QUEUE_LABEL, QueueError, QueueTree
from scheduling.topology import TopologyCache


class Candidates:
    """By leaf queue, its running pods of scheduler ``phalanx`` not being deleted: preemption's candidates.

    Read from the queue view (``QueueView.running_pods``, kept per pod change), one queue at a time and
    only when a pass asks: most passes ask for none or a few queues, and walking every running pod to
    sort them by queue was a fifth of a release pass at 1,000 nodes.
    """

    def __init__(self, running: Mapping[str, Mapping[str, Pod]]) -> None:
        self._running = running
        self._of: dict[str, tuple[Pod, ...]] = {}
        self._lowest: dict[str, int | None] = {}

    def of(self, queue: str) -> tuple[Pod, ...]:
        """The candidates of ``queue``, sorted by key (the order every walk of them takes)."""
        found = self._of.get(queue)
        if found is None:
            live = (p for p in self._running.get(queue, _NONE).values() if not p.terminating)
            found = self._of[queue] = tuple(sorted(live, key=lambda p: p.key))
        return found

    def lowest(self, queue: str) -> int | None:
        """The lowest priority among them; ``None`` when there are none (no preemption there)."""
        if queue not in self._lowest:
            self._lowest[queue] = min((p.priority for p in self.of(queue)), default=None)
        return self._lowest[queue]


_NONE: Mapping[str, Pod] = {}


def preemption_room(
    pod: Pod,
    snapshot: ClusterSnapshot,
    work: Statement,
    tree: QueueTree,
    candidates: Candidates,
    *,
    now: float,
) -> tuple[str, tuple[Pod, ...]] | None:
    """A node where ``pod`` fits once the victims ``narrow_victims`` allows there are gone, and those.

    Args:
        pod: the gated pod on its own.
        snapshot: the cluster now.
        work: the pass's working copy (left as it was: every trial is rolled back).
        tree: the queue tree.
        candidates: by leaf queue, its running pods of scheduler ``phalanx``.
        now: the caller's clock.
    """
    try:
        queue = tree.workload_queue(pod.labels.get(QUEUE_LABEL))
    except QueueError:
        return None
    proposed: dict[str, tuple[tuple[str, ...], int]] = {}
    for other in candidates.of(queue):
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
            return node, tuple(victims)
    return None


def plan_over(
    key: str,
    pod: Pod,
    node: str,
    victims: Sequence[Pod],
    snapshot: ClusterSnapshot,
    work: Statement,
    topologies: TopologyCache,
) -> tuple[PodPlan, ...]:
    """The plan of ``pod`` on ``node`` as if ``victims`` were gone (empty when it finds none).

    With plans carried on pods, the framework sidecar's plugin narrows kube-scheduler to the plan's
    node and turns it down while a pod there holds a planned GPU, without ruling the node out: so
    kube-scheduler's own preemption (DefaultPreemption) evicts, of the lower-priority pods there, those
    holding the planned GPUs, which are ``victims`` (the GPUs are free, or freed by them), and binds
    the pod once they are gone. The working copy is left as it was: the victims still run.
    """
    mark = work.checkpoint()
    for victim in victims:
        work.evict(victim, f"preempted for {pod.key}")
    plan = plan_gang(key, [pod], [node], snapshot, work.promises, topologies, statement=work)
    work.rollback(mark)
    if not isinstance(plan, GangPlan):
        return ()
    return tuple(PodPlan(pod.key, a.node, a.gpus) for a in plan.assignments)
