"""The queue hold of ``filter``: may this pod's group start now by its queue's rules?

The queue view (``scheduling.queues.view``) is rebuilt at most once a second, off the request path, so
the gate corrects it with what is fresher than the view, all read from the one snapshot the decision
reads:

- the free room now (``ClusterSnapshot.free_total`` after promises), not the view's;
- groups admitted since the view was built (``AdmittedBook``): kube-scheduler binds a pod about 100 ms
  after filter admits it, and until the view counts it, it counts against its queue here (and, when it
  is non-preemptible, against the quota non-preemptible work must stay within), or two groups admitted
  a moment apart could together pass a limit or the quota;
- of the groups ahead in the fair order, only those still waiting now (the view may list some placed
  since), that hold no reservation yet (a reserved gang's room is already out of the free room), and
  that kube-scheduler tried within ``TRIED_FRESH`` seconds (``TriedBook``).

Why the last one: kube-scheduler tries pods in its own order, round-robin over its backlog, and cannot be
told phalanx's. A group ahead that it is not trying now would hold its room for a whole round over the
backlog: with thousands of pending pods that is minutes of idle GPUs, during which every other pod is
turned down in turn (a soak at 1,000 pods/min ended with 5,291 pods pending on a nearly idle cluster). So
the fair order decides between groups that compete for the room now; a group out of kube-scheduler's
sight competes again as soon as it is tried (and the nudger wakes parked pods when room frees). Fairness
between queues over time is the job of their shares and reclaim, not of this tie-break, as in Kueue's
BestEffortFIFO and KAI, which skip a head of line that cannot start rather than idle for it.

Then ``scheduling.queues.check_rules`` applies the rules (limit, non-preemptible within quota, groups ahead
keep their room) and names the queue and the rule in its sentence.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import MappingProxyType

from immutables import Map

from scheduling.cluster.promises import PromiseBook
from scheduling.cluster.snapshot import ClusterSnapshot
from scheduling.gang.stand_in import stand_ins
from scheduling.model import Pod, Resources
from scheduling.queues import PendingGroup, QueueError, QueueRule, check_rules
from scheduling.queues.lines import pending_group
from scheduling.queues.view import QueueView
from scheduling.resources import ZERO, plus

AHEAD_CHECKED = 64
"""At most this many groups ahead are checked (the first ones matter: they go next)."""

TRIED_FRESH = 15.0
"""Seconds a group ahead keeps its room after kube-scheduler last tried one of its pods: its backoff
tops out at 10 s, so a group it is still retrying is seen again within that."""

ADMITTED_TTL = 5.0
"""Seconds an admitted group counts against its queue while the view does not show it yet."""


@dataclass(frozen=True, slots=True)
class AdmittedGroup:
    """A group the gate let through that the queue view may not count yet.

    Attributes:
        queue: its leaf queue.
        requests: what its waiting members request.
        uids: its waiting members; once the view counts them all, the entry has done its job.
        expires_at: when it stops counting in any case (seconds, the caller's clock).
        preemptible: whether it may be preempted; a non-preemptible one also counts against the quota
            non-preemptible work must stay within.
    """

    queue: str
    requests: Resources
    uids: frozenset[str]
    expires_at: float
    preemptible: bool = True


@dataclass(frozen=True, slots=True)
class AdmittedBook:
    """Groups admitted since the view was built, by group key (an immutable value, like ``PromiseBook``)."""

    by_group: Mapping[str, AdmittedGroup] = field(default_factory=lambda: MappingProxyType({}))

    def live(self, now: float, counted: frozenset[str]) -> AdmittedBook:
        """The book without entries that are done: expired at ``now``, or counted by the view."""

        def done(entry: AdmittedGroup) -> bool:
            return entry.expires_at < now or bool(entry.uids and entry.uids <= counted)

        if not any(done(entry) for entry in self.by_group.values()):
            return self
        return AdmittedBook(MappingProxyType({k: e for k, e in self.by_group.items() if not done(e)}))

    def without_pod(self, uid: str) -> AdmittedBook:
        """The book after pod ``uid`` was deleted: it holds nothing; a group left with no pod is done."""
        if not any(uid in entry.uids for entry in self.by_group.values()):
            return self
        keep = {}
        for key, entry in self.by_group.items():
            if uid in entry.uids:
                entry = replace(entry, uids=entry.uids - {uid})
                if not entry.uids:
                    continue
            keep[key] = entry
        return AdmittedBook(MappingProxyType(keep))

    def without_group(self, key: str) -> AdmittedBook:
        """The book after a decision found group ``key`` no node: it holds nothing, so it counts no more."""
        if key not in self.by_group:
            return self
        return AdmittedBook(MappingProxyType({k: e for k, e in self.by_group.items() if k != key}))

    def held_in(self, queue: str, *, besides: str, non_preemptible: bool = False) -> Resources:
        """What entries of ``queue`` other than ``besides`` hold (only non-preemptible ones, if asked)."""
        held = ZERO
        for key, entry in self.by_group.items():  # a sum: the order does not matter
            if key != besides and entry.queue == queue and not (non_preemptible and entry.preemptible):
                held = plus(held, entry.requests)
        return held

    def with_group(self, key: str, entry: AdmittedGroup) -> AdmittedBook:
        """The book with ``entry`` recorded for ``key``."""
        return AdmittedBook(MappingProxyType({**self.by_group, key: entry}))


@dataclass(frozen=True, slots=True)
class TriedBook:
    """When kube-scheduler last asked about each group (group key to seconds, the caller's clock).

    An immutable value like ``AdmittedBook``: ``Map`` copies share structure, so recording one try
    per filter call costs O(log n), not a copy of every group.
    """

    at: Map[str, float] = field(default_factory=Map)

    def with_try(self, key: str, now: float) -> TriedBook:
        """The book after group ``key`` was tried at ``now``."""
        return TriedBook(self.at.set(key, now))

    def fresh(self, key: str, now: float, within: float) -> bool:
        """Whether group ``key`` was tried in the ``within`` seconds before ``now``."""
        last = self.at.get(key)
        return last is not None and now - last <= within

    def pruned(self, now: float, within: float) -> TriedBook:
        """The book without groups last tried more than ``within`` seconds before ``now``."""
        stale = [key for key, last in self.at.items() if now - last > within]
        if not stale:
            return self
        at = self.at.mutate()
        for key in stale:
            del at[key]
        return TriedBook(at.finish())


@dataclass(frozen=True, slots=True)
class HoldAnswer:
    """The gate's answer: ``held`` is the sentence that holds the group, or ``None`` with ``admitted``.

    ``unknown_queue``: held because the view has no such queue, which a fresher view may have.
    ``rule`` and ``ahead``: the queue rule that holds the group and, when groups ahead keep their room,
    their keys (``scheduling.queues.RuleCheck``), for a user asking why (``scheduling.explain``).
    """

    held: str | None
    admitted: tuple[str, AdmittedGroup] | None = None
    unknown_queue: bool = False
    rule: QueueRule | None = None
    ahead: tuple[str, ...] = ()


def hold_for_queue(
    pod: Pod,
    snapshot: ClusterSnapshot,
    promises: PromiseBook,
    view: QueueView | None,
    admitted: AdmittedBook,
    *,
    now: float,
    free: Resources,
    tried: TriedBook | None = None,
    admitted_ttl: float = ADMITTED_TTL,
    ahead_checked: int = AHEAD_CHECKED,
    tried_fresh: float = TRIED_FRESH,
) -> HoldAnswer:
    """Decide whether ``pod``'s group may start now (see the module docstring for the corrections).

    Args:
        pod: the pod being filtered.
        snapshot: the cluster now.
        promises: the open promises now.
        view: the latest queue view; without one, every group is admitted (queues not yet known).
        admitted: groups admitted since the view was built.
        now: the caller's clock.
        free: ``snapshot.free_total(promises)``, which the caller may memoise per snapshot and book.
        tried: when kube-scheduler last tried each group; without it every group ahead counts, as if
            all were being tried now (a replay of a decision saved before this book existed).
        admitted_ttl: how long an admitted group counts at most.
        ahead_checked: how many groups ahead are checked at most.
        tried_fresh: how long after its last try a group ahead keeps its room.
    """
    if view is None:
        return HoldAnswer(None)
    members = snapshot.members(pod.group_key) if pod.group_key else [pod]
    podgroup = snapshot.podgroup(pod.group_key) if pod.group_key else None
    if podgroup is not None:  # a gang is planned whole, members not created yet as stand-ins: count them
        members = [*members, *stand_ins(podgroup, [m for m in members if not m.terminating])]
    if pod.quota_by_kueue or any(m.quota_by_kueue for m in members):  # Kueue's quota (docs/kueue.md)
        return HoldAnswer(None)
    try:
        group = pending_group(pod, members, view.tree)
    except QueueError as exc:
        return HoldAnswer(str(exc), unknown_queue=True)
    state = view.states.get(group.queue)
    if state is None:
        return HoldAnswer(None)
    live = admitted.live(now, view.counted)
    extra = live.held_in(group.queue, besides=group.key)
    pinned = live.held_in(group.queue, besides=group.key, non_preemptible=True)
    state = replace(
        state,
        allocated=plus(state.allocated, extra),
        allocated_non_preemptible=plus(state.allocated_non_preemptible, pinned),
    )

    def competing(other: PendingGroup) -> bool:
        if other.key in promises.by_group:
            return False
        return tried is None or tried.fresh(other.key, now, tried_fresh)

    ahead = still_waiting(view.ahead_of(group.key, free, limit=ahead_checked, keep=competing), snapshot)
    answer = check_rules(group, state, ahead, free=free)
    if not answer.ok:
        return HoldAnswer(answer.reason, rule=answer.rule, ahead=answer.ahead)
    uids = frozenset(m.uid for m in members if m.node_name is None)
    entry = AdmittedGroup(group.queue, group.requests, uids, now + admitted_ttl, group.preemptible)
    return HoldAnswer(None, (group.key, entry))


def no_longer_ahead(view: QueueView, key: str, ahead: Sequence[str]) -> bool:
    """Whether a group the ahead rule held for ``ahead`` may now pass, by ``view``'s fair order.

    True when one of those groups is no longer pending, or no longer before ``key``: the group was held
    against an older order (a new group queues behind every group the view has until the next build
    gives it its place) or the group ahead started. kube-scheduler does not know the fair order, so
    without a nudge such a group waits for the next cluster event or its five-minute flush.
    """
    mine = view.positions.get(key, len(view.pending))
    for other in ahead:
        theirs = view.positions.get(other)
        if theirs is None or theirs > mine:
            return True
    return False


def still_waiting(ahead: Sequence[PendingGroup], snapshot: ClusterSnapshot) -> tuple[PendingGroup, ...]:
    """The groups of ``ahead`` that still wait for kube-scheduler in ``snapshot``.

    A group placed since the view was built no longer waits. Nor does a group whose unplaced pods all
    carry the admission gate: kube-scheduler cannot try it until the placement manager releases it, and
    the release pass keeps the room of a group it holds back itself (``scheduling.admission.release``).
    """
    waiting = []
    for group in ahead:
        members = snapshot.members(group.key)
        if members:
            if any(_waits(m) for m in members):
                waiting.append(group)
            continue
        namespace, _, name = group.key.partition("/")
        pod = snapshot.pod(namespace, name)
        if pod is not None and _waits(pod):
            waiting.append(group)
    return tuple(waiting)


def _waits(pod: Pod) -> bool:
    return pod.node_name is None and not pod.terminating and not pod.gated


@dataclass
class RoomMemo:
    """``snapshot.free_total(promises)`` for the last (snapshot, book) pair: asked on every filter."""

    _last: tuple[ClusterSnapshot, PromiseBook, Resources] | None = None

    def free(self, snapshot: ClusterSnapshot, promises: PromiseBook) -> Resources:
        """The free room of ``snapshot`` after ``promises``, computed once per pair of values."""
        last = self._last
        if last is not None and last[0] is snapshot and last[1] is promises:
            return last[2]
        free = snapshot.free_total(promises)
        self._last = (snapshot, promises, free)
        return free
