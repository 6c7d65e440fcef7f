"""Recovery of a gang a crashed (or interrupted) bind left with its plan annotation.

Recovery completes the gang when every planned member still exists and the plan still holds (binding the
rest exactly as planned), and otherwise rolls it back by deleting the bound members, whose controller
(Job, MPIJob, ...) recreates them; either way no gang runs half-placed.

A member that was bound as planned and has finished since (Succeeded or Failed) was placed: it counts as
bound, not as lost. The members therefore come from the API server, finished ones included, not from a
cache of live pods; read from such a cache, a member that ran for a second before the crash looked gone,
the gang was rolled back, and the members still waiting counted "3 of 4 pods exist" for ever.

**A plan is a claim, checked before it is carried out.** It was true when it was written, but recovery
may come long after: the planned node may have been deleted (its reservation released, the GPUs handed to
other pods once it came back), and anyone who may edit a PodGroup may write the annotation. Binding the
rest "exactly as planned" then gives GPUs that other pods hold, the same index to two pods, on one
tenant's word. So a member is bound as planned only where its node is known and Ready, it gets as many
distinct GPUs as it asks for, and none of them is held by a pod or promised to one outside the gang; the
members still to bind must not share one. Otherwise the gang is rolled back, and its unbound members
are planned again from the facts of now.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from scheduling.cluster.promises import Promise, PromiseBook
from scheduling.cluster.snapshot import ClusterSnapshot
from scheduling.model import TERMINAL_PHASES, Pod
from scheduling.plan import Assignment, Plan


class RecoveryKind(enum.Enum):
    """How a gang found with a plan annotation ends; the value names it in metrics."""

    BOUND = "bound"
    """Every planned member was bound already: the crash came after the last Binding."""
    COMPLETED = "completed"
    """Members were left unbound: they are bound as planned."""
    ROLLED_BACK = "rolled_back"
    """A planned member is gone, or the plan no longer holds: the members still on their nodes are deleted."""


@dataclass(frozen=True, slots=True)
class Recovery:
    """What to do with a gang found with a plan annotation.

    Attributes:
        kind: how the gang ends.
        bind: the assignments still to carry out, as planned (completing the gang).
        delete: bound members still holding their node to delete (rolling the gang back).
        reason: why, for the event.
    """

    kind: RecoveryKind
    bind: tuple[Assignment, ...]
    delete: tuple[Pod, ...]
    reason: str


@dataclass(frozen=True, slots=True)
class RecoveryFacts:
    """What recovery checks a plan against, besides the gang's own pods.

    Attributes:
        snapshot: the cluster now (nodes, and the GPUs live pods hold).
        promises: GPUs promised now; the gang's own promises are not counted against it.
        absent: nodes the API server says are gone or not Ready, with why (the cache sees a deletion a
            watch lag late), read for the nodes of the members still to bind.
    """

    snapshot: ClusterSnapshot
    promises: PromiseBook
    absent: Mapping[str, str]


def plan_recovery(plan: Plan, pods_by_name: Mapping[str, Pod], facts: RecoveryFacts) -> Recovery:
    """Decide how to finish a gang whose plan annotation is still on its PodGroup.

    Args:
        plan: the written plan, its members' assignments.
        pods_by_name: every pod of the gang by name, finished ones included (from the API server).
        facts: the cluster the members still to bind would be bound into.
    """
    to_bind: list[Assignment] = []
    placed: list[Pod] = []
    lost: list[str] = []
    for member in sorted(plan.assignments, key=lambda a: a.pod):
        name = member.pod.partition("/")[2]
        pod = pods_by_name.get(name)
        if pod is None or pod.uid != member.uid or pod.terminating:
            lost.append(name)
        elif pod.node_name is None:
            if pod.phase in TERMINAL_PHASES:  # failed before it was ever bound: it will not run
                lost.append(name)
            else:
                to_bind.append(member)
        elif pod.node_name == member.node:
            placed.append(pod)
        else:
            lost.append(name)
    finished = sum(1 for p in placed if p.phase in TERMINAL_PHASES)
    ran = f" ({finished} of them finished since)" if finished else ""
    if not to_bind:
        # Every member still here is bound: the bind finished. A member lost since then is the
        # placement manager's business (stale gangs, with a grace period), not a crash to undo.
        return Recovery(RecoveryKind.BOUND, (), (), f"every planned member was bound{ran}")
    running = tuple(p for p in placed if p.phase not in TERMINAL_PHASES)
    if lost:
        reason = f"the bind was interrupted and members {', '.join(lost)} are gone"
        return _rolled_back(
            reason, running, f"the {len(to_bind)} unbound member(s) wait for the gang to be whole again"
        )
    own = frozenset(a.uid for a in plan.assignments)
    broken = plan_broken(to_bind, pods_by_name, facts, own)
    if broken:
        then = f"the {len(to_bind)} unbound member(s) are planned again"
        return _rolled_back(f"the bind was interrupted and {broken}", running, then)
    return Recovery(
        RecoveryKind.COMPLETED,
        tuple(to_bind),
        (),
        f"binding the {len(to_bind)} members the interrupted bind left; {len(placed)} were bound{ran}",
    )


def plan_broken(
    to_bind: Sequence[Assignment], pods_by_name: Mapping[str, Pod], facts: RecoveryFacts, own: frozenset[str]
) -> str:
    """Why binding ``to_bind`` as planned would break a fact of now (``""`` when it would not).

    Args:
        to_bind: the members still to bind, as planned.
        pods_by_name: the gang's pods by name (each member of ``to_bind`` among them).
        facts: the cluster now.
        own: the UIDs of every member of the plan, whose promises are the gang's own.
    """
    promises = facts.promises
    for uid in sorted(own & promises.by_uid.keys()):
        promises = promises.release(uid)
    taken: dict[str, set[int]] = {}
    for member in to_bind:
        name = member.pod.partition("/")[2]
        node = facts.snapshot.nodes.get(member.node)
        why = facts.absent.get(member.node)
        if why:
            return f"{why} ({name} was planned there)"
        if node is None or not node.ready or node.gpu_problem is not None:
            return f"node {member.node}, planned for {name}, left the cluster or is not Ready"
        asks, gpus = pods_by_name[name].requests.gpus, frozenset(member.gpus)
        if len(gpus) != len(member.gpus) or len(gpus) != asks:
            return f"the plan gives {name} GPUs {list(member.gpus)} where it asks for {asks} distinct GPU(s)"
        missing = sorted(gpus - node.gpu_indices)
        if missing:
            return f"node {member.node} has no GPU {missing} (planned for {name})"
        free = facts.snapshot.free_on(member.node, promises)
        mine = taken.setdefault(member.node, set())
        room = (free.indices if free is not None else frozenset()) - mine
        held = sorted(gpus - room)
        if held or free is None or len(mine) + len(gpus) > free.count:
            what = f"GPUs {held}" if held else f"{len(gpus)} more GPU(s)"
            return f"{what} on {member.node}, planned for {name}, are held by other pods now"
        mine |= gpus
    return ""


def hold_plan(recovery: Recovery, pods_by_name: Mapping[str, Pod], group: str, until: float) -> list[Promise]:
    """Promises for the members a completing recovery binds, kept until the cache shows them bound.

    Made in the same ledger update as the decision, so no bind between the check and the Bindings can
    hand out the same GPUs.
    """
    return [
        Promise(
            a.uid,
            a.pod,
            a.node,
            a.gpus,
            until,
            pods_by_name[a.pod.partition("/")[2]].requests,
            group=group,
        )
        for a in recovery.bind
    ]


def _rolled_back(why: str, running: tuple[Pod, ...], then: str) -> Recovery:
    reason = (
        f"{why}, so the gang cannot be completed; deleting the {len(running)} bound member(s) still "
        f"running; {then}"
    )
    return Recovery(RecoveryKind.ROLLED_BACK, (), running, reason)
