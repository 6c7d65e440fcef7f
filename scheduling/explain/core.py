"""``explain``: why a pod or PodGroup is pending (or where it runs), from one snapshot, by the filter's rules.

An explanation is a decision of the core like any other: from one snapshot, the promises known, the queue
view and the time, and nothing else, so ``phalanx why`` says what the extender would say. It is made by
the functions the extender's ``filter`` runs (``scheduling.session.filter_pod`` and what it composes),
never by a second copy of their rules; what the filter does not see (the nodes kube-scheduler's own
filters exclude first) comes from ``scheduling.nodes.constraints``.

Order: a pod that is not phalanx's, is being deleted, finished or bound is said so at once (a bound pod
with its node and GPU indices). A waiting one is explained on the snapshot without finished pods, as the
extender's cache holds the cluster: its place in the fair order, its gang's members, every node grouped
by reason, and the cause (``scheduling.explain.waiting``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from scheduling.admission.flight import ReleasedBook
from scheduling.admission.queue_hold import AHEAD_CHECKED, AdmittedBook, TriedBook
from scheduling.admission.release import release
from scheduling.cluster.promises import PromiseBook
from scheduling.cluster.snapshot import ClusterSnapshot
from scheduling.explain.explanation import Cause, Explanation, GangCount, NodeGroup, PlacedPod
from scheduling.explain.node_answers import candidates, group_nodes, turned_down_before_phalanx
from scheduling.explain.queue_place import queue_place
from scheduling.explain.target import Subject, Target, subject_of
from scheduling.explain.waiting import Finding, fits_now, held_by_queue, short_of_room
from scheduling.gang.filter import members_to_plan
from scheduling.model import SCHEDULER_NAME, TERMINAL_PHASES, Pod, group_key
from scheduling.offline.pending_filter import live_snapshot
from scheduling.queues.view import QueueView, view_of
from scheduling.reasons import Rejection, Verdict
from scheduling.session import FilterInput, FilterOutcome, SessionSettings, filter_pod
from scheduling.topology import TopologyCache

_NO_PROMISES = PromiseBook()
_SETTINGS = SessionSettings()


def _placed(pod: Pod) -> PlacedPod:
    return PlacedPod(pod.name, pod.node_name or "", pod.gpu_indices or ())


def _gpus(pod: Pod) -> str:
    if pod.gpu_indices:
        return f"GPUs {','.join(map(str, pod.gpu_indices))}"
    return "no GPUs" if not pod.requests.gpus else f"{pod.requests.gpus} GPUs (indices not recorded)"


def _settled(subject: Subject) -> Explanation | None:
    """The answer for a target that is not waiting for phalanx, or ``None`` when it is."""
    target, pod, name = subject.target, subject.pod, subject.name
    kind, key = target.kind, target.key
    if pod is None:  # a PodGroup with no pod at all
        group = subject.group
        need = group.min_member if group is not None else 0
        line = f"{name} waits for members: 0 of {need} pods exist"
        return Explanation(kind, key, Cause.GANG_INCOMPLETE, line, gang=GangCount(need, 0, 0, 0))
    if pod.scheduler_name != SCHEDULER_NAME:
        line = (
            f"{name} is not phalanx's: its spec.schedulerName is {pod.scheduler_name}, and phalanx places "
            f"only pods with schedulerName {SCHEDULER_NAME}; ask that scheduler (kubectl describe pod)"
        )
        return Explanation(kind, key, Cause.NOT_PHALANX, line)
    bound = tuple(_placed(m) for m in subject.members if m.holds_resources)
    if kind == "pod":
        where = f" on node {pod.node_name} with {_gpus(pod)}" if pod.node_name else ""
        if pod.terminating:
            return Explanation(kind, key, Cause.TERMINATING, f"{name} is being deleted{where}", bound=bound)
        if pod.phase in TERMINAL_PHASES:
            line = f"{name} has finished ({pod.phase}){where.replace(' on', ', ran on')}"
            return Explanation(kind, key, Cause.FINISHED, line, bound=bound)
        if pod.node_name is not None:
            line = f"{name} is bound to node {pod.node_name} with {_gpus(pod)} (phase {pod.phase})"
            return Explanation(kind, key, Cause.BOUND, line, bound=bound)
        return None
    live = [m for m in subject.members if not m.terminating and m.phase not in TERMINAL_PHASES]
    if not live:
        return Explanation(kind, key, Cause.FINISHED, f"{name} has finished: none of its pods is live")
    if all(m.node_name is not None for m in live):
        nodes = ", ".join(sorted({m.node_name or "" for m in live}))
        line = f"{name} is bound: all {len(live)} live pods run, on {nodes}"
        return Explanation(kind, key, Cause.BOUND, line, bound=bound)
    return None


def _finding(
    subject: Subject,
    outcome: FilterOutcome,
    asked: FilterInput,
    waiting: Sequence[Pod],
    context: tuple[Mapping[str, Rejection], tuple[NodeGroup, ...]],
    topologies: TopologyCache,
    settings: SessionSettings,
) -> Finding:
    """The cause, in the filter's order: queue hold, gang filter (PodGroup, members), fit, capacity."""
    pod, group, name = asked.pod, subject.group, subject.name
    live = sum(1 for m in subject.members if not m.terminating)
    asked_phalanx = bool(asked.candidates)  # kube-scheduler asks phalanx only when some node passed
    if asked_phalanx and outcome.verdict is not None and outcome.verdict.verdict is Verdict.QUEUE_HOLD:
        return held_by_queue(name, outcome)
    if subject.gang and group is None:
        return Finding(Cause.NO_PODGROUP, f"{name} waits for its PodGroup {pod.group_key} to be created")
    if group is not None and live < group.min_member:
        need = group.min_member
        return Finding(
            Cause.GANG_INCOMPLETE, f"{name} waits for members: {live} of {need} pods exist (minMember {need})"
        )
    if outcome.feasible:
        return fits_now(name, pod, outcome, asked, topologies)
    key = pod.group_key if subject.gang and pod.group_key else pod.key
    before, groups = context
    return short_of_room(
        name, key, waiting, asked, outcome, before, groups, topologies=topologies, settings=settings
    )


def kube_scheduler_tries(snapshot: ClusterSnapshot, view: QueueView, key: str, now: float) -> TriedBook:
    """The groups ahead of ``key`` that kube-scheduler would send phalanx, as tried at ``now``.

    The extender counts a group ahead only while kube-scheduler tries it
    (``scheduling.admission.queue_hold``); a group no node passes kube-scheduler's own filters for (a 16-GPU
    pod on 8-GPU nodes) is never sent, so it holds no room. A driver outside the extender cannot see the
    tries; this is what they would be with kube-scheduler keeping up with its queue.
    """
    tried = TriedBook()
    for ahead in view.ahead_of(key, limit=AHEAD_CHECKED):
        namespace, _, name = ahead.key.partition("/")
        members = snapshot.members(ahead.key) or [p for p in [snapshot.pod(namespace, name)] if p is not None]
        waiting = [m for m in members if m.node_name is None and not m.terminating]
        if any(candidates(snapshot, turned_down_before_phalanx(m, snapshot)) for m in waiting):
            tried = tried.with_try(ahead.key, now)
    return tried


def explain(
    snapshot: ClusterSnapshot,
    target: Target,
    *,
    now: float,
    promises: PromiseBook = _NO_PROMISES,
    view: QueueView | None = None,
    topologies: TopologyCache | None = None,
    settings: SessionSettings = _SETTINGS,
) -> Explanation:
    """Explain why ``target`` is pending, or where it runs.

    Args:
        snapshot: the cluster (nodes, pods, PodGroups, Queues).
        target: the pod or PodGroup asked about.
        now: the wall clock (seconds since the epoch): the tries it assumes, and whether a gang short of
            members is still being created.
        promises: GPUs promised to binds and gang reservations in flight (a driver outside the extender
            knows none: empty).
        view: the queue view; built from ``snapshot`` and ``promises`` when ``None``.
        topologies: topology scoring cache (a fresh one when ``None``).
        settings: the filter's settings (gangs, locality keys).

    Raises:
        ExplainError: the target does not exist.
    """
    subject = subject_of(snapshot, target, gangs=settings.gangs)
    settled = _settled(subject)
    if settled is not None or subject.pod is None:
        return settled or Explanation(target.kind, target.key, Cause.FINISHED, f"{subject.name} has no pod")
    snapshot = live_snapshot(snapshot)  # the extender's cache keeps no finished pod: nor does its filter
    subject = subject_of(snapshot, target, gangs=settings.gangs)
    if subject.pod is None:
        return Explanation(target.kind, target.key, Cause.FINISHED, f"{subject.name} has no live pod")
    pod, group, topologies = subject.pod, subject.group, topologies or TopologyCache()
    view = view if view is not None else view_of(snapshot, promises)
    before = turned_down_before_phalanx(pod, snapshot)
    tried = kube_scheduler_tries(snapshot, view, group_key(pod), now)
    asked = FilterInput(
        pod, candidates(snapshot, before), snapshot, promises, view, AdmittedBook(), now, tried, wall=now
    )
    outcome = filter_pod(asked, topologies=topologies, settings=settings)
    live = [m for m in subject.members if not m.terminating]
    waiting = members_to_plan(pod, live, group, promises) if subject.gang and group is not None else [pod]
    sample = min(waiting, key=lambda p: (-p.requests.gpus, p.name))  # the planner places it first
    fits = "node(s) with room for the pod now"
    if subject.gang:
        fits = f"node(s) with room for one member now ({sample.requests.gpus} GPUs)"
    groups = group_nodes(sample, asked.candidates, before, snapshot, promises, fits=fits)
    finding = _finding(subject, outcome, asked, waiting, (before, groups), topologies, settings)
    gang = None
    if subject.gang:
        bound, unbound = sum(m.holds_resources for m in live), sum(m.node_name is None for m in live)
        gang = GangCount(group.min_member if group else 0, len(live), bound, unbound, group is not None)
    queue_members = snapshot.members(pod.group_key) if pod.group_key else [pod]
    return Explanation(
        kind=target.kind,
        key=target.key,
        cause=finding.cause,
        verdict=finding.verdict,
        filter_message=outcome.verdict.message if outcome.verdict is not None and asked.candidates else None,
        queue=queue_place(pod, queue_members, view, outcome.hold),
        gang=gang,
        nodes=groups,
        bound=tuple(_placed(m) for m in subject.members if m.holds_resources),
        what_if=finding.what_if,
        admission=_admission(snapshot, promises, view, topologies, group_key(pod), now)
        if any(m.gated for m in waiting)
        else None,
    )


def _admission(
    snapshot: ClusterSnapshot,
    promises: PromiseBook,
    view: QueueView,
    topologies: TopologyCache,
    key: str,
    now: float,
) -> str:
    """What the release pass decides now for the gated group ``key``, as one sentence."""
    decision = release(snapshot, promises, view, ReleasedBook(), topologies, now=now)
    for released in decision.released:
        if released.group == key:
            return f"released by the next pass: {released.reason}"
    reason = next((k.reason for k in decision.kept if k.group == key), "not in the queue view yet")
    return f"kept gated by the placement manager: {reason}"
