"""The filter decision for a member of a gang: answer from its reservation, or plan the whole gang.

Rules (docs/design/gang-scheduling.md §1):

- a member that has a reservation gets exactly its reserved node; a repeated filter for the same pod
  UID gives the same answer;
- the unbound members are planned together (``scheduling.gang.gang_planner``); the plan becomes
  promises (a reservation) that expire unless bind consumes them, and the member gets its planned node;
- a gang with fewer live pods than ``minMember`` is planned whole all the same, the missing members as
  stand-ins (``scheduling.gang.stand_in``): a member created later takes a stand-in's place, or the
  gang is planned again when none covers it;
- a gang that does not fit is turned down on every node with one sentence saying what it needs;
- a member given its node turns down no other node: kube-scheduler takes a lone feasible node without
  reading any other node's status, and a reason for each of 4,999 other candidates was a 420 KB reply
  per member (2 ms to build here, more to decode there); the gang's state is in the verdict.

Every rejection here is ``UnschedulableAndUnresolvable``: kube-scheduler's per-pod preemption cannot
make room for a whole gang, and evicting for one member would only half-place it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from types import MappingProxyType

from scheduling import reasons
from scheduling.cluster.promises import Promise, PromiseBook
from scheduling.cluster.snapshot import ClusterSnapshot
from scheduling.gang.gang_planner import DEFAULT_LOCALITY_KEYS, GangPlan, plan_gang, unplaced
from scheduling.gang.stand_in import adopt, being_created, has_stand_ins, is_stand_in, stand_ins
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


_NONE_REJECTED: Mapping[str, Rejection] = MappingProxyType({})


def _answer(
    node: str | None, candidates: Sequence[str], promises: PromiseBook, message: str
) -> GangFilterDecision:
    verdict = GroupVerdict(Verdict.GANG_WAITING if node is None else Verdict.GANG_RESERVED, message)
    if node is not None and node in candidates:  # (always: every caller's node is a candidate)
        return GangFilterDecision((node,), _NONE_REJECTED, promises, verdict)
    rejected = dict.fromkeys(candidates, reasons.gang_waiting(message))
    return GangFilterDecision((), MappingProxyType(rejected), promises, verdict)


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
    wall: float = 0.0,
) -> GangFilterDecision:
    """Decide filter for ``pod``, a member of the gang ``group`` whose live pods are ``members``.

    ``wall`` is the wall clock (seconds since the epoch; 0: none), against which members' creation
    times tell whether a gang short of members is still being created (``stand_in.being_created``).
    """
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
    if held is None and has_stand_ins(key, promises):
        taken = adopt(pod, key, candidates, promises)
        if taken is not None:
            node = taken.by_uid[pod.uid].node
            message = (
                f"gang {key}: member {pod.name} takes its reserved place on node {node}"
                f" ({len(live)} of {group.min_member} pods exist)"
            )
            return _answer(node, candidates, taken, message)
        promises = promises.release_group(key)  # no place kept for the missing covers this one: plan again
    missing = stand_ins(group, live) if being_created(live, wall, reservation_ttl) else ()
    if len(live) < group.min_member and not missing:
        message = f"gang {key}: waiting for members: {len(live)} of {group.min_member} pods exist"
        return _answer(None, candidates, promises, message)
    pending = [*members_to_plan(pod, live, group, promises), *missing]
    nominated = as_nominated(pod, pending, candidates)
    plan = None
    if nominated is not None:
        plan = plan_gang(
            key, nominated, nominated_nodes(nominated), snapshot, promises, cache, locality_keys=locality_keys
        )
    if not isinstance(plan, GangPlan):
        plan = plan_gang(key, pending, candidates, snapshot, promises, cache, locality_keys=locality_keys)
    if not isinstance(plan, GangPlan):
        return _answer(None, candidates, promises, plan.message)
    new = [
        Promise(a.uid, a.pod, a.node, a.gpus, now + reservation_ttl, plan.members[a.uid].requests, key)
        for a in plan.assignments
    ]
    mine = next(a.node for a in plan.assignments if a.uid == pod.uid)
    nodes = ", ".join(plan.nodes)
    absent = sum(1 for p in new if is_stand_in(p.pod_uid))
    here = len(new) - absent
    pods = f"{len(new)} pods"
    if absent:
        pods = f"{here} pod{'s' if here != 1 else ''} and {absent} not created yet"
    message = f"gang {key}: {pods} reserved on {len(plan.nodes)} nodes ({nodes})"
    decision = _answer(mine, candidates, promises.add_all(new), message)
    return GangFilterDecision(decision.feasible, decision.rejected, decision.promises, decision.verdict, plan)


def as_nominated(pod: Pod, pending: Sequence[Pod], candidates: Sequence[str]) -> list[Pod] | None:
    """The members to plan, each held to its nominated node, when the gang arrives nominated.

    The release pass nominates every member of a gang it lets through to the node its plan found
    (``placement.release_pass``), and kube-scheduler tries a nominated member on that node alone. The
    usual plan puts every member on the candidates of the member being filtered, which now are that one
    node: a gang that needs two nodes would find no room and its first member would go through every
    node. So when the member is tried on its nominated node alone and every member to plan has a
    nomination, each is held to its own (``Pod.pinned``, which the planner honours); ``None`` otherwise,
    and when the nominated plan finds no room the caller plans as usual.
    """
    if len(candidates) != 1 or pod.nominated_node != candidates[0]:
        return None
    if any(m.nominated_node is None for m in pending):
        return None  # a stand-in, or a member no pass nominated
    return [replace(m, pinned=frozenset({m.nominated_node or ""})) for m in pending]


def nominated_nodes(members: Sequence[Pod]) -> list[str]:
    """The distinct nodes ``members`` are held to, sorted."""
    return sorted({n for m in members for n in m.pinned})
