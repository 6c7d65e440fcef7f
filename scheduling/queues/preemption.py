"""Preemption inside a queue: narrow kube-scheduler's proposed victims to those phalanx allows.

kube-scheduler's ``preempt`` call brings, per candidate node, the pods its dry run would evict
(docs/design/extender-protocol.md §2.7). It knows nothing of queues or gangs, so phalanx keeps a
victim only if:

- it is in the preemptor's queue (taking from other queues is reclaim's job, by fair share);
- its priority is lower than the preemptor's;
- it is preemptible (``scheduling.queues.workloads.is_preemptible``) and past its queue's minimum runtime;
- it is not in the preemptor's own gang;
- and, for a gang member, either it goes alone as part of its gang's surplus, or the same holds for every
  member of its gang and the gang is evicted whole.

**Surplus members go alone** (``scheduling.queues.surplus``). A gang running more live members than its
``minMember`` can lose the difference and keep running. On one node, if a gang's proposed victims number
at most its surplus, none of them is its leader (an MPI launcher, a PyTorch master) and each passes the
checks above, they are kept alone: no other member is added. Surplus is compared per node, because
kube-scheduler evicts the victims of one chosen node only. Otherwise the gang is evicted whole: its other
members on the same node are added to that node's victims, and members on other nodes, which cannot be
named in that node's list (kube-scheduler resolves every UID on the node itself), are returned as
``companions`` of the node, to be evicted with it if kube-scheduler picks it.

**Surplus before whole gangs.** If some kept node evicts no whole gang (its victims are pods on their own
and surplus members), every node that would evict a gang whole is dropped: kube-scheduler does not see
companions and would otherwise happily pick a node whose eviction kills a gang elsewhere. If every kept
node evicts a whole gang, all stay candidates, as before. A node left without victims is dropped, since
kube-scheduler requires at least one victim per returned node.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

from scheduling.queues.queue_tree import QueueTree
from scheduling.queues.surplus import GangSize


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
        leader: it leads its job (``scheduling.queues.surplus.is_leader``) and never goes alone.
    """

    uid: str
    key: str
    queue: str
    priority: int
    preemptible: bool = True
    gang: str | None = None
    started_at: float | None = None
    leader: bool = False


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
    sizes: Mapping[str, GangSize] | None = None,
    tree: QueueTree | None = None,
    now: float | None = None,
) -> PreemptionDecision:
    """Keep the proposed victims ``preemptor`` may preempt: surplus members alone, else gangs whole.

    Args:
        preemptor: the pod kube-scheduler wants to place.
        proposed: per candidate node, the pods kube-scheduler's dry run would evict there.
        gang_members: per gang key, every live member with its node; a gang missing here is taken to be
            the proposed pods that name it.
        sizes: per gang key, its live members and ``minMember``; a gang missing here has no surplus.
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
    evicts_whole: dict[str, str] = {}  # kept node -> the first gang its choice evicts whole
    for node in sorted(proposed):
        on_node = sorted(proposed[node], key=lambda p: (p.key, p.uid))
        alone = _surplus_alone(on_node, sizes or {}, preemptor, tree, now)
        kept: dict[str, VictimPod] = {}
        elsewhere: dict[str, VictimPod] = {}
        for pod in on_node:
            if pod.uid in alone:
                reasons[f"pod {pod.key} goes alone: {alone[pod.uid]}"] = None
                kept[pod.uid] = pod
                continue
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
            if pod.gang is not None:
                evicts_whole.setdefault(node, pod.gang)
            for where, member in unit.values():
                if where == node:
                    if member.uid not in kept and member.uid not in {p.uid for p in on_node}:
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
    cheap = [node for node in sorted(victims) if node not in evicts_whole]
    if cheap:
        for node, gang in sorted(evicts_whole.items()):
            if node in victims:
                reasons[
                    f"node {node} is dropped: it would evict gang {gang} whole, while node {cheap[0]} "
                    "needs only pods on their own or members above their gang's minimum"
                ] = None
                del victims[node], companions[node]
    return PreemptionDecision(MappingProxyType(victims), MappingProxyType(companions), tuple(reasons))


def _surplus_alone(
    listed: Sequence[VictimPod],
    sizes: Mapping[str, GangSize],
    preemptor: Preemptor,
    tree: QueueTree | None,
    now: float | None,
) -> dict[str, str]:
    """The node's proposed gang members that go alone, by UID, each with why (its gang's size).

    A gang's proposed members on the node go alone when they are no more than its surplus, none leads
    it, and none is refused on its own account; else none of them does (the whole-gang rule decides).
    """
    by_gang: dict[str, list[VictimPod]] = {}
    for pod in listed:
        if pod.gang is not None:
            by_gang.setdefault(pod.gang, []).append(pod)
    alone: dict[str, str] = {}
    for gang, pods in sorted(by_gang.items()):
        size = sizes.get(gang)
        if (
            size is None
            or len(pods) > size.surplus
            or any(p.leader for p in pods)
            or any(_refusal(p, preemptor, tree, now) is not None for p in pods)
        ):
            continue
        alone.update((p.uid, size.describe(gang)) for p in pods)
    return alone
