"""Which gated groups the placement manager releases now: ungated, they enter kube-scheduler's queue.

Pods of scheduler ``phalanx`` are created with the scheduling gate ``phalanx.io/admission``
(``scheduling.model.ADMISSION_GATE``); kube-scheduler does not try them until it is removed. Without
it, every pod the extender turns down stays in kube-scheduler's queue and is retried round-robin, so with
thousands pending a round takes minutes and a gang reserved at its first member's filter idles its GPUs
until the other members' turn comes (docs/design/admission-gates.md has the numbers). With it, only
groups that can start now are in kube-scheduler's queue, and rounds are short. ``release`` decides, from
one snapshot, walking the pending groups in the fair order ``order_pending`` gives (``QueueView.pending``):

1. **Unknown or malformed groups are released**: a pod of another scheduler, a pod whose queue label
   names no leaf queue, a gang whose PodGroup does not exist ``unknown_group_grace`` seconds after the
   pod was created. phalanx cannot reason about them, and holding them would hide them with no sentence;
   ungated, the extender's own gates hold them and say why on the pod.
2. **Gangs go whole**: every gated member at once, and only once ``minMember`` pods exist.
3. **The queue's rules** (``scheduling.queues.check_rules``: limit, non-preemptible within quota), counting
   what groups released but not yet bound will hold.
4. **Short kube-scheduler queue**: at most ``max_unbound_gpus`` GPUs and ``max_unbound_pods`` pods
   released and not yet bound (one group is always allowed when none is in flight, however big); not
   with plans carried on pods (``GateSettings.plan_on_pod``), which kube-scheduler binds at first try.
5. **Room now**: the GPUs free after promises, less what released-but-unbound groups need, must cover
   the group, and the gang planner must place it on the nodes' real room (``plan_gang`` on a
   ``Statement`` that holds every group released before it, so fragmentation counts). A group that does
   not fit is skipped: those behind it may go (work-conserving, like Kueue's BestEffortFIFO). But the
   first skipped group that has waited longer than ``starve_after`` keeps the nodes it will start on
   (``scheduling.admission.reserve``): nothing behind it is placed there, so a big gang is not starved
   by a stream of small ones, while every other node keeps serving them. A group that cannot be placed
   even on the schedulable nodes emptied keeps nothing: it is marked as never fitting.
Groups whose quota Kueue owns (admitted by Kueue, ``scheduling.quota_owner``; docs/kueue.md) skip rule 3:
Kueue's ClusterQueue already admitted them, and a second quota check would be double accounting. They
go first, oldest first (Kueue admitted them and counts them as running), under rules 2, 4 and 5.

6. **Priority preemption**: a pod on its own that could start by preempting lower-priority pods of its
   own queue (``scheduling.preempt_session.narrow_victims`` decides which, on one node) is released, or
   gating it would disable kube-scheduler's preemption. It counts against its queue and the in-flight
   budget but takes no free room (it takes its victims'). Gangs are not: the extender turns a gang down
   as unresolvable (no per-pod preemption can make room for a whole gang); reclaim is their way.

Every kept group carries its rule (``KeptRule``). The GPUs free at the end of the walk (after what is in
flight and what the pass released) are idle while groups wait; ``idle`` attributes them to the kept
groups in the fair order, each taking at most what it needs, under its rule, and the GPUs held for
groups released but not bound yet under ``in_flight``: the placement manager exports them, so an
operator sees which rule keeps GPUs idle.

The per-node check knows what the core models: GPU indices, CPU, memory, pins, and kube-scheduler's
taint, node-selector and required-affinity filters (``scheduling.nodes.constraints``; a gang is offered
the nodes at least one of its members may use). What it does not model (inter-pod affinity, topology
spread, volumes) can still keep a released group waiting in kube-scheduler; it then counts as in
flight for ``release_ttl`` seconds at most.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from scheduling.admission.flight import InFlight, ReleasedBook, in_flight
from scheduling.admission.outcome import (
    DEFAULT_GATE_SETTINGS,
    GateSettings,
    Kept,
    KeptRule,
    Released,
    ReleaseDecision,
)
from scheduling.admission.preemption_room import Candidates
from scheduling.admission.replan import hold_plans
from scheduling.admission.verdict import decide, kueue_groups_of
from scheduling.admission.walk import (
    NodeFacts,
    PassFacts,
    Walk,
    count_in_flight,
    gpus_of,
    idle_by_rule,
    keys_of,
)
from scheduling.cluster.ledger import Flight, Waiting, is_released
from scheduling.cluster.promises import PromiseBook
from scheduling.cluster.snapshot import ClusterSnapshot
from scheduling.cluster.statement import Statement, StatementChain
from scheduling.model import SCHEDULER_NAME, Pod, group_key
from scheduling.queues.view import QueueView
from scheduling.timestamps import seconds
from scheduling.topology import TopologyCache

__all__ = ["GateSettings", "Kept", "KeptRule", "ReleaseDecision", "Released", "ReleasedBook", "release"]

_NO_FLIGHT = Flight((), (0, 0, 0), None, False, False)
_NOT_IN_VIEW = "waits for the next queue view (the pod is newer than it)"


def release(
    snapshot: ClusterSnapshot,
    promises: PromiseBook,
    view: QueueView,
    book: ReleasedBook,
    topologies: TopologyCache,
    *,
    now: float,
    settings: GateSettings = DEFAULT_GATE_SETTINGS,
    chain: StatementChain | None = None,
) -> ReleaseDecision:
    """Decide which gated groups to release now (see the module docstring for the rules, in order).

    Args:
        snapshot: the cluster now; pods carry ``gated``.
        promises: the open promises (gang reservations, binds in flight).
        view: the queue view built from this snapshot (``view_of``): the fair order and queue states.
        book: groups released by earlier passes, with when.
        topologies: the topology cache the gang planner scores GPU sets with.
        now: the caller's clock, in the seconds of ``book``.
        settings: the limits above.
        chain: the statements of earlier passes, when the caller keeps them: this pass's room, node
            orders and allowed nodes then start from the last one's (``scheduling.cluster.statement``).
    """
    # The pass reads the pods that wait (gated, or released and not bound yet), not the running ones:
    # those it needs (preemption's candidates, Kueue's gangs) the queue view keeps per pod change, and
    # the ledger the statement chain carries keeps these grouped per pod change.
    work = chain.open(snapshot, promises) if chain is not None else Statement(snapshot, promises)
    waiting = work.ledger.look(snapshot)
    gated = {key: list(pods) for key, pods in waiting.gated.items()}
    flight, walk, ctx = _begin_walk(work, view, book, topologies, waiting, now=now, settings=settings)
    released: list[Released] = []
    kept: list[Kept] = []
    for key in sorted(gated):
        unknown = _unknown(key, gated[key], snapshot, view, now=now, grace=settings.unknown_group_grace)
        if unknown is not None:
            if unknown[0]:
                released.append(Released(key, keys_of(gated[key]), unknown[1]))
            else:
                kept.append(Kept(key, unknown[1], KeptRule.UNKNOWN, gpus_of(gated[key])))
            del gated[key]
    for group in [*kueue_groups_of(gated, view.kueue), *view.pending]:
        if group.key in gated:
            answer = decide(group, gated.pop(group.key), walk, ctx)
            if isinstance(answer, Kept):
                kept.append(answer)
            else:
                released.append(answer)
    kept.extend(Kept(key, _NOT_IN_VIEW, KeptRule.VIEW, gpus_of(gated[key])) for key in sorted(gated))
    idle = idle_by_rule(walk, kept)
    return ReleaseDecision(
        tuple(released),
        tuple(kept),
        flight.book.with_released((r.group for r in released), now).with_refused(walk.refused),
        idle,
        tuple(walk.replanned),
    )


def _begin_walk(
    work: Statement,
    view: QueueView,
    book: ReleasedBook,
    topologies: TopologyCache,
    waiting: Waiting,
    *,
    now: float,
    settings: GateSettings,
) -> tuple[InFlight, Walk, PassFacts]:
    """A walk's start: the pass's facts, and the room and budget left after the groups in flight."""
    snapshot, promises = work.snapshot, work.promises
    flight = in_flight(waiting, snapshot, book, promises, now=now, ttl=settings.release_ttl)
    nodes = NodeFacts.of(work)
    ctx = PassFacts(
        snapshot,
        view,
        work,
        nodes.names,
        Candidates(view.running_pods),
        topologies,
        now,
        settings,
        nodes.capacity,
        view.kueue,
        nodes.allowed,
        flight.book.refused,
    )
    walk = Walk(snapshot.free_total(promises).gpus, 0, 0, 0, {}, {})
    misplaced, unheld = _turned_down(flight, snapshot, view)
    if not settings.plan_on_pod:
        # A statement carried from one seeded with held plans must be seeded too before it is read
        # (``Statement.seed``): with none to hold, the nodes seeded last are named as changed.
        work.held.hold(work, {})
    count_in_flight(flight, flight.lapsed | misplaced, walk, ctx)
    if settings.plan_on_pod:
        # A carried plan is a promise kube-scheduler keeps whenever it tries the pod: past the in-flight
        # window it no longer counts against the budget, but its GPUs are still held (or the plan made
        # again), or a later plan takes them and the pod waits for ever on a plan that cannot hold.
        hold_plans(flight, unheld, walk, ctx)
    return flight, walk, ctx


def _turned_down(
    flight: InFlight, snapshot: ClusterSnapshot, view: QueueView
) -> tuple[frozenset[str], Mapping[str, Pod]]:
    """The counting groups released to be turned down as misplaced, and the released pods not held.

    A group released to be turned down never binds: a counting one with a misplaced pod among those
    that count counts not at all, and none of its pods is held; of a lapsed group, only the misplaced
    pods are not held. The
    promised pods of counting groups are not held either (a promise holds their room already).
    """
    flights = flight.waiting.released
    unheld = {pod.key: pod for pod in flight.promised}
    promised = frozenset(unheld)
    groups: set[str] = set()
    for key in sorted(view.misplaced):
        pod = snapshot.pod(*key.split("/", 1))
        if (
            pod is None
            or not is_released(pod)
            or not any(p is pod for p in flights.get(group_key(pod), _NO_FLIGHT).pods)
        ):
            continue
        if group_key(pod) in flight.lapsed:
            unheld[key] = pod
        elif key not in promised:  # a promised pod counts no more; the group's others still do
            groups.add(group_key(pod))
    for group in sorted(groups):
        unheld.update((p.key, p) for p in flights[group].pods)
    return frozenset(groups), unheld


def _unknown(
    key: str, pods: Sequence[Pod], snapshot: ClusterSnapshot, view: QueueView, *, now: float, grace: float
) -> tuple[bool, str] | None:
    """For a group phalanx cannot reason about: (released?, why); ``None`` for every other group."""
    if any(p.scheduler_name != SCHEDULER_NAME for p in pods):
        return True, f"not a pod of scheduler {SCHEDULER_NAME}; released so that its own scheduler decides"
    misplaced = [view.misplaced[p.key] for p in pods if p.key in view.misplaced]
    if misplaced:
        return True, f"{misplaced[0]}; released so that the extender turns it down with this reason"
    if pods[0].group_key is not None and snapshot.podgroup(key) is None:
        age = now - min((seconds(p.created) or now) for p in pods)
        if age < grace:
            return (
                False,
                f"waits for PodGroup {key} to be created ({age:.0f}s so far, released after {grace:g}s)",
            )
        return True, f"PodGroup {key} does not exist; released so that the extender's gang filter says so"
    return None
