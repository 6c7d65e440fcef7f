"""The queue view kept from one snapshot to the next: each pod's share is counted when the pod changes.

``view_of`` walks every live pod of phalanx's to build a view. The placement manager needs a view for
every release pass (several a second on a busy cluster), and between two passes only a few pods change:
walking 5,000 running pods to count the 50 that finished was most of a pass at 500 nodes. A
``QueueTally`` keeps what each pod adds to the view (to a queue's allocation, to a waiting or running
group, or off the capacity) and, given a newer snapshot, recounts only the pods the state's change log
names (``ClusterSnapshot.pod_changes``; without it, the pods whose object changed: pods are immutable
values, so that is one identity check per pod). The view is then assembled from the sums
(``assemble_view``), so its cost follows the queues and the groups that wait, not the pods that run.

What a pod adds depends on the queues in force (its label resolves to a queue, or it is misplaced), on
which gangs Kueue admitted, and on whether a promise holds it (a gang's reservation or a bind in flight
counts as held, not waiting); when the queues or the stamps change every pod is counted again, when a
pod's promise comes or goes that pod is. A tally's view equals ``view_of(snapshot, promises)`` (a
property test checks it on random sequences of snapshots and promises).

Not thread-safe: the caller serialises ``view`` calls (``placement.views.SharedView`` and the
extender's ``ViewKeeper`` hold a lock).
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping
from dataclasses import dataclass, replace
from types import MappingProxyType

from immutables import Map

from scheduling.cluster.change_log import ChangeLog
from scheduling.cluster.promises import PromiseBook
from scheduling.cluster.snapshot import ClusterSnapshot
from scheduling.model import QUEUE_LABEL, SCHEDULER_NAME, Pod, Resources, group_key
from scheduling.queues import PREEMPTIBLE_LABEL, Queue, QueueError, QueueTree, RunningGang, is_preemptible
from scheduling.queues.lines import PendingLines
from scheduling.queues.view import QueueView, assemble_view, running_gang, view_of
from scheduling.quota_owner import by_kueue
from scheduling.resources import minus, plus, total


@dataclass(frozen=True, slots=True)
class _Share:
    """What one pod adds to the view: exactly one of the places below, or nothing."""

    outside: bool = False  # what it holds comes off the capacity (another scheduler's, Kueue's, misplaced)
    queue: str | None = None  # it holds resources charged to this queue
    non_preemptible: bool = False
    misplaced: str | None = None  # why its label names no queue that holds workloads
    running: str | None = None  # the group it runs in
    waiting: str | None = None  # the group it waits in


_NOTHING = _Share()
_NO_PROMISES = PromiseBook()
_NO_PODS: Map[str, Pod] = Map()


class QueueTally:
    """Each pod's share of the queue view, kept across snapshots (see the module docstring)."""

    def __init__(self) -> None:
        self._pods: dict[str, Pod] = {}  # the pods of the last snapshot, to find the changed ones
        self._entries: dict[str, tuple[Pod, _Share]] = {}  # uid -> the pod as counted, and its share
        self._queues: list[Queue] | None = None
        self._tree: QueueTree | None = None
        self._stamped: dict[str, int] = {}  # gang key -> members stamped by Kueue
        self._kueue: frozenset[str] = frozenset()
        self._outside = [0, 0, 0]
        self._held: dict[str, list[int]] = {}
        self._held_np: dict[str, list[int]] = {}
        self._holders: dict[str, int] = {}  # queue -> pods counted in _held (its entry lives while any)
        self._holders_np: dict[str, int] = {}
        self._misplaced: dict[str, str] = {}
        self._counted: set[str] = set()
        self._running: dict[str, dict[str, Pod]] = {}
        self._by_queue: dict[str, Map[str, Pod]] = {}  # queue -> its running pods, handed out as they are
        self._waiting: dict[str, dict[str, Pod]] = {}
        self._lines = PendingLines()  # the waiting groups figured, kept sorted per queue
        self._changed: set[str] = set()  # waiting groups whose pods changed since the last view
        self._gang_of: dict[str, RunningGang] = {}  # running group -> its figures, dropped when it changes
        self._keys: list[str] = []  # the running groups' keys, sorted
        self._stale: set[str] = set()  # running groups changed since the last view
        self._gangs_out: tuple[RunningGang, ...] | None = None  # the last view's, while none changed
        self._promised: frozenset[str] = frozenset()  # uids a promise held at the last view
        self._pod_log: ChangeLog | None = None  # the pod change log the counts were last brought up with
        self._pod_version = 0
        self._log: ChangeLog | None = None  # the node change log the capacity sum was last brought up with
        self._version = 0
        self._allocatable: dict[str, Resources] = {}  # schedulable node -> its allocatable, as summed
        self._capacity = Resources()
        self.recounts = 0
        """How many times every pod was counted again (the first view, a Queue or Kueue change)."""

    def view(self, snapshot: ClusterSnapshot, promises: PromiseBook = _NO_PROMISES) -> QueueView:
        """The view of ``snapshot`` after ``promises``, recounting only the pods changed since the last."""
        current = snapshot.queue_pods
        if current is None:  # a snapshot without the kept index (built from lists): walk it
            return view_of(snapshot, promises)
        promised = frozenset(promises.by_uid)
        flipped, self._promised = promised ^ self._promised, promised
        changed, gone = self._changes(snapshot, current, flipped)
        for uid in gone:
            self._stamp(self._pods.pop(uid), -1)
        for uid, pod in changed:
            old = self._pods.get(uid)
            if old is not None:
                self._stamp(old, -1)
            self._pods[uid] = pod
            self._stamp(pod, 1)
        queues = snapshot.queue_list()
        kueue = frozenset(key for key, count in self._stamped.items() if count)
        if self._tree is None or queues != self._queues or kueue != self._kueue:
            self._queues, self._tree, self._kueue = queues, QueueTree.build(queues), kueue
            self._recount()
        else:
            for uid in gone:
                self._uncount(uid)
            for uid, pod in changed:
                self._uncount(uid)
                self._count(uid, pod)
        capacity = minus(
            self._capacity_of(snapshot), plus(snapshot.held_elsewhere(), Resources(*self._outside))
        )
        for key in sorted(self._changed):
            self._lines.put(key, sorted(self._waiting.get(key, {}).values(), key=_by_key), self._tree)
        self._changed.clear()
        view = assemble_view(
            self._tree,
            capacity,
            self._held,
            self._held_np,
            self._gangs(),
            self._lines.lines(),
            self._lines.sums(),
            self._misplaced,
            self._counted,
        )
        running_pods = MappingProxyType(dict(self._by_queue))  # persistent maps: no copy of a pod list
        return replace(view, kueue=self._kueue, running_pods=running_pods, source=(snapshot, promises))

    def _changes(
        self, snapshot: ClusterSnapshot, current: Mapping[str, Pod], flipped: frozenset[str]
    ) -> tuple[list[tuple[str, Pod]], list[str]]:
        """The pods changed since the last view (with those whose promise came or went), and those gone.

        The state's pod log (``ClusterSnapshot.pod_changes``) names them; without it, or when it no
        longer covers the span, every pod is looked at (an identity check each: 40,000 pods took about
        4 ms, on the extender's and the placement manager's path per view).
        """
        log = snapshot.pod_changes if not snapshot.arrivals else None  # arrivals are in no log
        names = None
        if log is not None and log is self._pod_log and self._pod_version <= snapshot.version:
            names = log.since(self._pod_version, snapshot.version)
        self._pod_log, self._pod_version = log, snapshot.version
        if names is None:
            changed = [(u, p) for u, p in current.items() if self._pods.get(u) is not p or u in flipped]
            return changed, [uid for uid in self._pods if uid not in current]
        changed, gone = [], []
        for uid in sorted(names | flipped):
            pod = current.get(uid)
            if pod is None:
                if uid in self._pods:
                    gone.append(uid)
            elif self._pods.get(uid) is not pod or uid in flipped:
                changed.append((uid, pod))
        return changed, gone

    def _capacity_of(self, snapshot: ClusterSnapshot) -> Resources:
        """The schedulable nodes' allocatable, summed again only for the nodes changed since the last view.

        Summing every node per view was most of a view at 5,000 nodes, though pods change far more
        often than nodes; the state's change log (``ClusterSnapshot.changes``) says which nodes to look at.
        """
        log, nodes = snapshot.changes, snapshot.nodes
        changed = None
        if log is not None and log is self._log and self._version <= snapshot.version:
            changed = log.since(self._version, snapshot.version)
        if changed is None:
            self._allocatable = {name: n.allocatable for name, n in nodes.items() if n.takes_pods}
            self._capacity = total(self._allocatable.values())
        else:
            for name in changed:
                old = self._allocatable.pop(name, None)
                if old is not None:
                    self._capacity = minus(self._capacity, old)
                node = nodes.get(name)
                if node is not None and node.takes_pods:
                    self._allocatable[name] = node.allocatable
                    self._capacity = plus(self._capacity, node.allocatable)
        self._log, self._version = log, snapshot.version
        return self._capacity

    def _gangs(self) -> tuple[RunningGang, ...]:
        """The running groups by key; only those whose members changed are figured again.

        The sorted keys are kept (a changed group is put in or taken out by bisection) and the tuple
        is kept while no running group changes: a view per cluster version sorted and walked every
        running group (2.5 ms with 10,000 running), while most versions change only waiting pods.
        """
        if self._gangs_out is not None:
            return self._gangs_out
        assert self._tree is not None
        keys = self._keys
        for key in sorted(self._stale):
            at = bisect.bisect_left(keys, key)
            present = at < len(keys) and keys[at] == key
            members = self._running.get(key)
            if members and not present:
                keys.insert(at, key)
            elif not members and present:
                del keys[at]
            if members:
                self._gang_of[key] = running_gang(key, list(members.values()), self._tree)
        self._stale.clear()
        self._gangs_out = tuple(map(self._gang_of.__getitem__, keys))
        return self._gangs_out

    def _stamp(self, pod: Pod, sign: int) -> None:
        key = pod.group_key
        if key is not None and pod.quota_by_kueue:
            count = self._stamped.get(key, 0) + sign
            if count:
                self._stamped[key] = count
            else:
                self._stamped.pop(key, None)

    def _recount(self) -> None:
        self.recounts += 1
        self._entries.clear()
        self._outside = [0, 0, 0]
        for each in (self._held, self._held_np, self._holders, self._holders_np, self._misplaced):
            each.clear()
        self._counted.clear()
        self._running.clear()
        self._by_queue.clear()
        self._waiting.clear()
        self._lines.clear()
        self._changed.clear()
        self._gang_of.clear()
        self._keys.clear()
        self._stale.clear()
        self._gangs_out = None
        for uid, pod in self._pods.items():
            self._count(uid, pod)

    def _count(self, uid: str, pod: Pod) -> None:
        share = self._share_of(pod, uid in self._promised)
        if share is not _NOTHING:
            self._entries[uid] = (pod, share)
            self._apply(uid, pod, share, 1)

    def _uncount(self, uid: str) -> None:
        entry = self._entries.pop(uid, None)
        if entry is not None:
            self._apply(uid, entry[0], entry[1], -1)

    def _apply(self, uid: str, pod: Pod, share: _Share, sign: int) -> None:
        """Add (``sign`` 1) or take away (-1) ``pod``'s ``share``."""
        if share.outside:
            _step(self._outside, pod, sign)
        if share.misplaced is not None:
            if sign > 0:
                self._misplaced[pod.key] = share.misplaced
            else:
                self._misplaced.pop(pod.key, None)
        if share.queue is not None:
            _hold(self._held, self._holders, share.queue, pod, sign)
            if share.non_preemptible:
                _hold(self._held_np, self._holders_np, share.queue, pod, sign)
            if sign > 0:
                self._counted.add(uid)
            else:
                self._counted.discard(uid)
        if share.running is not None:
            self._gang_of.pop(share.running, None)
            self._stale.add(share.running)
            self._gangs_out = None
            if share.queue is not None:
                _keep(self._by_queue, share.queue, uid, pod, sign)
        if share.waiting is not None:
            self._changed.add(share.waiting)
        for groups, key in ((self._running, share.running), (self._waiting, share.waiting)):
            if key is None:
                continue
            if sign > 0:
                groups.setdefault(key, {})[uid] = pod
            else:
                members = groups.get(key, {})
                members.pop(uid, None)
                if not members:
                    groups.pop(key, None)

    def _share_of(self, pod: Pod, promised: bool) -> _Share:
        """Where ``pod`` counts, as ``build_queue_view`` counts it (``promised``: a promise holds it)."""
        assert self._tree is not None, "the tree is built before any pod is counted"
        if pod.scheduler_name != SCHEDULER_NAME or by_kueue(pod, self._kueue):
            return _Share(outside=True) if pod.holds_resources else _NOTHING
        labels = pod.labels
        try:
            queue = self._tree.workload_queue(labels.get(QUEUE_LABEL))
        except QueueError as exc:
            return _Share(outside=pod.holds_resources, misplaced=str(exc))
        if pod.holds_resources or promised:
            non_preemptible = not is_preemptible(pod.priority, labels.get(PREEMPTIBLE_LABEL))
            running = group_key(pod) if pod.holds_resources else None
            return _Share(queue=queue, non_preemptible=non_preemptible, running=running)
        if pod.node_name is None and not pod.terminating:
            return _Share(waiting=group_key(pod))
        return _NOTHING


def _by_key(pod: Pod) -> str:
    return pod.key


def _step(sums: list[int], pod: Pod, sign: int) -> None:
    need = pod.requests
    sums[0] += sign * need.milli_cpu
    sums[1] += sign * need.memory
    sums[2] += sign * need.gpus


def _hold(sums: dict[str, list[int]], holders: dict[str, int], queue: str, pod: Pod, sign: int) -> None:
    """Count ``pod`` in (or out of) ``queue``'s sums; the entry goes with the last pod, as in a walk."""
    _step(sums.setdefault(queue, [0, 0, 0]), pod, sign)
    count = holders.get(queue, 0) + sign
    if count:
        holders[queue] = count
    else:
        holders.pop(queue, None)
        sums.pop(queue, None)


def _keep(maps: dict[str, Map[str, Pod]], queue: str, uid: str, pod: Pod, sign: int) -> None:
    """Add (``sign`` 1) or take away (-1) ``pod`` in ``queue``'s persistent map of running pods."""
    pods = maps.get(queue, _NO_PODS)
    pods = pods.set(uid, pod) if sign > 0 else (pods.delete(uid) if uid in pods else pods)
    if pods:
        maps[queue] = pods
    else:
        maps.pop(queue, None)
