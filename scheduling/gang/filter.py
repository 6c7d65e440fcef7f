"""The filter decision for a member of a gang: answer from its reservation, or plan the whole gang.

Rules (docs/design/gang-scheduling.md §1):

- a member that has a reservation gets exactly its reserved node; a repeated filter for the same pod
  UID gives the same answer;
- a gang with fewer live pods than ``minMember`` is not planned: every node is turned down with
  "gang ns/g: waiting for members: 6 of 8 pods exist";
- otherwise the unbound members are planned together (``scheduling.gang.gang_planner``); the plan becomes
  promises (a reservation) that expire unless bind consumes them, and the member gets its planned node;
- a gang that does not fit is turned down on every node with one sentence saying what it needs.

Every rejection here is ``UnschedulableAndUnresolvable``: kube-scheduler's per-pod preemption cannot
make room for a whole gang, and evicting for one member would only half-place it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

from scheduling import reasons
from scheduling.cluster.promises import Promise, PromiseBook
from scheduling.cluster.snapshot import ClusterSnapshot
from scheduling.gang.gang_planner import DEFAULT_LOCALITY_KEYS, GangPlan, plan_gang, unplaced
from scheduling.model import Pod, PodGroup
from scheduling.reasons import GroupVerdict, Rejection, Verdict
from scheduling.topology import TopologyCache


@dataclass(frozen=True, slots=True)
class GangFilterDecision:
    """What filter answers for a gang member, and how the promise book changes.

    Attributes:
        feasible: the member's node (at most one), if it has a place.
        rejected: every other candidate, with the reason.
        promises: the book to keep after this decision (the reservation added or dropped).
        verdict: the gang's state (reserved or waiting) in one sentence, for its events and status.
        planned: the new plan, when this call made one.
    """

    feasible: tuple[str, ...]
    rejected: Mapping[str, Rejection]
    promises: PromiseBook
    verdict: GroupVerdict
    planned: GangPlan | None = None


def _answer(
    node: str | None, candidates: Sequence[str], promises: PromiseBook, message: str
) -> GangFilterDecision:
    verdict = GroupVerdict(Verdict.GANG_WAITING if node is None else Verdict.GANG_RESERVED, message)
    rejection: Rejection = reasons.gang_waiting(message)
    feasible = tuple(n for n in dict.fromkeys(candidates) if n == node)
    rejected = {n: rejection for n in dict.fromkeys(candidates) if n != node}
    return GangFilterDecision(feasible, MappingProxyType(rejected), promises, verdict)


def members_to_plan(pod: Pod, live: Sequence[Pod], group: PodGroup, promises: PromiseBook) -> list[Pod]:
    """The members a filter of ``pod`` plans together: the gang's unplaced, unreserved live members.

    Only ``pod`` itself when the gang is whole already (running and reserved members reach
    ``minMember``): an extra member is placed on its own.
    """
    key = pod.group_key or ""
    running = [m for m in live if m.holds_resources]
    reserved = promises.by_group.get(key, frozenset())
    pending = [m for m in unplaced(live) if m.uid not in reserved or m.uid == pod.uid]
    # By UID, never by value: kube-scheduler's copy of the pod may differ from the cache's in a field such
    # as status.startTime, and a value comparison would then plan this member alone.
    if len(running) + len(reserved) >= group.min_member or all(m.uid != pod.uid for m in pending):
        return [pod]  # the gang is whole already: place this extra member on its own
    return pending


def decide_gang_member(
    pod: Pod,
    group: PodGroup | None,
    members: Sequence[Pod],
    candidates: Sequence[str],
    snapshot: ClusterSnapshot,
    promises: PromiseBook,
    cache: TopologyCache,
    *,
    now: float,
    reservation_ttl: float,
    locality_keys: Sequence[str] = DEFAULT_LOCALITY_KEYS,
) -> GangFilterDecision:
    """Decide filter for ``pod``, a member of the gang ``group`` whose live pods are ``members``."""
    key = pod.group_key or ""
    if group is None:
        message = f"gang {key}: waiting for PodGroup {key} to be created"
        return _answer(None, candidates, promises, message)
    held = promises.by_uid.get(pod.uid)
    if held is not None and held.group == key:
        if held.node in candidates:
            message = f"gang {key}: member {pod.name} is reserved on node {held.node}"
            return _answer(held.node, candidates, promises, message)
        promises = promises.release_group(key)  # the plan does not suit this member any more: plan again
    live = [m for m in members if not m.terminating]
    if len(live) < group.min_member:
        message = f"gang {key}: waiting for members: {len(live)} of {group.min_member} pods exist"
        return _answer(None, candidates, promises, message)
    pending = members_to_plan(pod, live, group, promises)
    plan = plan_gang(key, pending, candidates, snapshot, promises, cache, locality_keys=locality_keys)
    if not isinstance(plan, GangPlan):
        return _answer(None, candidates, promises, plan.message)
    new = [
        Promise(a.uid, a.pod, a.node, a.gpus, now + reservation_ttl, plan.members[a.uid].requests, key)
        for a in plan.assignments
    ]
    mine = next(a.node for a in plan.assignments if a.uid == pod.uid)
    nodes = ", ".join(plan.nodes)
    message = f"gang {key}: {len(new)} pods reserved on {len(plan.nodes)} nodes ({nodes})"
    decision = _answer(mine, candidates, promises.add_all(new), message)
    return GangFilterDecision(decision.feasible, decision.rejected, decision.promises, decision.verdict, plan)
