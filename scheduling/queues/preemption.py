"""Preemption inside a queue: narrow kube-scheduler's proposed victims to those phalanx allows, gangs whole.

kube-scheduler's ``preempt`` call brings, per candidate node, the pods its dry run would evict
(extender-protocol.md §2.7). It knows nothing of queues or gangs, so phalanx keeps a victim only if:

- it is in the preemptor's queue (taking from other queues is reclaim's job, by fair share);
- its priority is lower than the preemptor's;
- it is preemptible (``scheduling.queues.workloads.is_preemptible``) and past its queue's minimum runtime;
- it is not in the preemptor's own gang;
- and the same holds for every member of its gang: a gang is evicted whole or not at all.

A kept gang's other members on the same node are added to that node's victims. Members on other nodes
cannot be named in that node's list (kube-scheduler resolves every UID on the node itself), so they are
returned as ``companions`` of the node, to be evicted with it if kube-scheduler picks it. A node left
without victims is dropped, since kube-scheduler requires at least one victim per returned node.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

from scheduling.queues.model import QueueTree


class PreemptRule(enum.Enum):
    """Why a proposed victim stays, for metrics."""

    OWN_GANG = "own_gang"
    OTHER_QUEUE = "other_queue"
    NOT_LOWER_PRIORITY = "not_lower_priority"
    NOT_PREEMPTIBLE = "not_preemptible"
    MIN_RUNTIME = "min_runtime"


@dataclass(frozen=True, slots=True)
class VictimPod:
    """A running pod kube-scheduler proposes to evict (or a member of such a pod's gang).

    Attributes:
        uid: the pod's UID, as the preempt reply names it.
        key: ``namespace/name``, for messages.
        queue: its leaf queue.
        priority: its PriorityClass value.
        preemptible: see ``is_preemptible``.
        gang: ``namespace/name`` of its PodGroup, or ``None`` for a pod on its own.
        started_at: when it started running (seconds, like ``now``), for the minimum runtime.
    """

    uid: str
    key: str
    queue: str
    priority: int
    preemptible: bool = True
    gang: str | None = None
    started_at: float | None = None


@dataclass(frozen=True, slots=True)
class GangMember:
    """A live member of a gang and the node it runs on."""

    node: str
    pod: VictimPod


@dataclass(frozen=True, slots=True)
class Preemptor:
    """The pending pod that wants the room: its queue, priority and gang."""

    key: str
    queue: str
    priority: int
    gang: str | None = None


@dataclass(frozen=True, slots=True)
class PreemptionDecision:
    """The narrowed victims.

    Attributes:
        victims: per candidate node kept, the victim UIDs on that node (sorted by pod key).
        companions: per kept node, UIDs of the same gangs' members on other nodes, to evict as well if the
            node is chosen (empty for gangs that live on one node).
        reasons: one sentence per decision taken (a victim kept out, a member added, a node dropped).
    """

    victims: Mapping[str, tuple[str, ...]]
    companions: Mapping[str, tuple[str, ...]]
    reasons: tuple[str, ...]


def _refusal(
    pod: VictimPod, preemptor: Preemptor, tree: QueueTree | None, now: float | None
) -> tuple[PreemptRule, str] | None:
    if pod.gang is not None and pod.gang == preemptor.gang:
        return PreemptRule.OWN_GANG, f"it is in {preemptor.key}'s own gang"
    if pod.queue != preemptor.queue:
        return PreemptRule.OTHER_QUEUE, (
            f"it is in queue {pod.queue}, not {preemptor.queue}; priority preempts only within a queue"
        )
    if pod.priority >= preemptor.priority:
        return PreemptRule.NOT_LOWER_PRIORITY, (
            f"its priority {pod.priority} is not lower than {preemptor.key}'s {preemptor.priority}"
        )
    if not pod.preemptible:
        return PreemptRule.NOT_PREEMPTIBLE, "it is not preemptible"
    if tree is not None and now is not None and pod.started_at is not None and pod.queue in tree:
        minimum = tree.min_runtime_seconds(pod.queue)
        if now - pod.started_at < minimum:
            return PreemptRule.MIN_RUNTIME, (
                f"it has run {now - pod.started_at:g}s of its queue's minimum runtime {minimum}s"
            )
    return None


def preempt_within_queue(
    preemptor: Preemptor,
    proposed: Mapping[str, Sequence[VictimPod]],
    gang_members: Mapping[str, Sequence[GangMember]] | None = None,
    *,
    tree: QueueTree | None = None,
    now: float | None = None,
) -> PreemptionDecision:
    """Keep only the proposed victims that may be preempted for ``preemptor``, gangs whole.

    Args:
        preemptor: the pod kube-scheduler wants to place.
        proposed: per candidate node, the pods kube-scheduler's dry run would evict there.
        gang_members: per gang key, every live member with its node; a gang missing here is taken to be
            the proposed pods that name it.
        tree: the queues, for the minimum runtime (skipped without it or without ``now``).
        now: the current time, in the seconds of ``VictimPod.started_at``.
    """
    members: dict[str, dict[str, tuple[str, VictimPod]]] = {}
    for gang, listed in (gang_members or {}).items():
        members[gang] = {m.pod.uid: (m.node, m.pod) for m in listed}
    for node, pods in proposed.items():
        for pod in pods:
            if pod.gang is not None:
                members.setdefault(pod.gang, {}).setdefault(pod.uid, (node, pod))
    reasons: dict[str, None] = {}
    victims: dict[str, tuple[str, ...]] = {}
    companions: dict[str, tuple[str, ...]] = {}
    for node in sorted(proposed):
        kept: dict[str, VictimPod] = {}
        elsewhere: dict[str, VictimPod] = {}
        for pod in sorted(proposed[node], key=lambda p: (p.key, p.uid)):
            unit = members.get(pod.gang, {}) if pod.gang is not None else {pod.uid: (node, pod)}
            refusals = [
                (m, refused)
                for _, m in sorted(unit.values(), key=lambda nm: (nm[1].key, nm[1].uid))
                if (refused := _refusal(m, preemptor, tree, now)) is not None
            ]
            if refusals:
                member, (_, why) = refusals[0]
                if member.uid == pod.uid:
                    reasons[f"pod {pod.key} is not preempted: {why}"] = None
                else:
                    reasons[
                        f"pod {pod.key} is not preempted: gang {pod.gang} stays whole, "
                        f"and its member {member.key} may not be preempted ({why})"
                    ] = None
                continue
            for where, member in unit.values():
                if where == node:
                    if member.uid not in kept and member.uid not in {p.uid for p in proposed[node]}:
                        reasons[
                            f"pod {member.key} on node {node} is added: gang {pod.gang} is evicted whole"
                        ] = None
                    kept[member.uid] = member
                else:
                    elsewhere[member.uid] = member
                    reasons[
                        f"pod {member.key} on node {where} goes too if node {node} is chosen: "
                        f"gang {pod.gang} is evicted whole"
                    ] = None
        if not kept:
            reasons[f"node {node} is dropped: none of its proposed victims may be preempted"] = None
            continue
        victims[node] = tuple(p.uid for p in sorted(kept.values(), key=lambda p: (p.key, p.uid)))
        companions[node] = tuple(p.uid for p in sorted(elsewhere.values(), key=lambda p: (p.key, p.uid)))
    return PreemptionDecision(MappingProxyType(victims), MappingProxyType(companions), tuple(reasons))
