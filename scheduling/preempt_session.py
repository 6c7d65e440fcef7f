"""preempt: keep only the victims the queue rules allow, a gang's members above ``minMember`` alone.

kube-scheduler's dry run proposes victims per node; the extender hands them here with one snapshot. Each
victim and each member of its gang becomes a ``VictimPod`` (queue, priority, preemptibility, leader);
each gang its live size and ``minMember`` (``GangSize``); ``scheduling.queues.preempt_within_queue``
decides.
"""

from __future__ import annotations

from collections.abc import Mapping

from scheduling.cluster.snapshot import ClusterSnapshot
from scheduling.model import Pod, group_key
from scheduling.queues import (
    PREEMPTIBLE_LABEL,
    QUEUE_LABEL,
    GangMember,
    GangSize,
    Preemptor,
    QueueError,
    QueueTree,
    VictimPod,
    is_leader,
    is_preemptible,
    preempt_within_queue,
)
from scheduling.quota_owner import gang_by_kueue

KUEUE_PREEMPTS = (
    "admitted by Kueue: its quota, and preemption for it, are Kueue's (its ClusterQueue's preemption "
    "policy), so kube-scheduler's preemption takes no pod for it"
)
"""Why a pod whose quota Kueue owns gets no victims from phalanx (docs/kueue.md)."""

Victims = Mapping[str, tuple[tuple[str, ...], int]]
"""Per candidate node: the victims' UIDs and kube-scheduler's count of PodDisruptionBudget violations."""
"""Preemption candidates as kube-scheduler sends them: node -> (victim UIDs, PDB violations)."""


def narrow_victims(
    pod: Pod, proposed: Victims, snapshot: ClusterSnapshot, tree: QueueTree, *, now: float
) -> tuple[dict[str, tuple[tuple[str, ...], int]], tuple[str, ...]]:
    """Keep the victims ``pod`` may preempt within its queue: surplus members alone, else gangs whole.

    Returns the reasons too. A gang's size is its live members (bound, not finished, not terminating)
    and its PodGroup's ``minMember``; a gang without a PodGroup in the snapshot has no surplus.
    """
    if gang_by_kueue(pod, snapshot):
        return {}, (KUEUE_PREEMPTS,)
    try:
        queue = tree.workload_queue(pod.labels.get(QUEUE_LABEL))
    except QueueError as exc:
        return {}, (str(exc),)
    preemptor = Preemptor(group_key(pod), queue, pod.priority, pod.group_key)
    victims: dict[str, list[VictimPod]] = {}
    gangs: dict[str, list[GangMember]] = {}
    sizes: dict[str, GangSize] = {}
    for node, (uids, _) in sorted(proposed.items()):
        for uid in uids:
            victim = snapshot.pod_by_uid(uid)
            if victim is None:
                continue
            victims.setdefault(node, []).append(_victim(victim, tree, gang_by_kueue(victim, snapshot)))
            gang = victim.group_key
            if gang is None or gang in gangs:
                continue
            placed = [m for m in snapshot.members(gang) if m.node_name is not None]
            kueue = any(m.quota_by_kueue for m in placed)
            gangs[gang] = [GangMember(m.node_name, _victim(m, tree, kueue)) for m in placed if m.node_name]
            group = snapshot.podgroup(gang)
            if group is not None:
                running = sum(m.holds_resources and not m.terminating for m in placed)
                sizes[gang] = GangSize(running, group.min_member)
    decision = preempt_within_queue(preemptor, victims, gangs, sizes=sizes, tree=tree, now=now)
    kept = {node: (uids, proposed[node][1]) for node, uids in decision.victims.items() if uids}
    return kept, decision.reasons


def _victim(pod: Pod, tree: QueueTree, kueue: bool) -> VictimPod:
    """The victim as the queue rules see it; one in no queue of phalanx's ("") is nobody's to take.

    A pod whose quota Kueue owns (``kueue``) is in none (only Kueue preempts what it admitted:
    docs/kueue.md).
    """
    try:
        queue = "" if kueue else tree.workload_queue(pod.labels.get(QUEUE_LABEL))
    except QueueError:
        queue = ""
    return VictimPod(
        uid=pod.uid,
        key=pod.key,
        queue=queue,
        priority=pod.priority,
        preemptible=is_preemptible(pod.priority, pod.labels.get(PREEMPTIBLE_LABEL)),
        gang=pod.group_key,
        started_at=pod.started_at,
        leader=is_leader(pod.labels),
    )
