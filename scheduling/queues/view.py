"""The queues' view of the cluster: what each queue holds, deserves and waits for, at one moment.

Built from the same cluster facts as every other decision (nodes, live pods, promises) and the Queue
objects; the extender reads it to admit or hold a group at ``filter``, the placement manager to reclaim
and to write queue status. Building it walks every pod, so callers refresh it off the hot path.

Groups are PodGroups (all their members) or pods on their own. A pod belongs to the queue its label
``phalanx.io/queue`` names, else the default queue. Pods of other schedulers are not in any queue: they
take capacity away from all queues.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import MappingProxyType

from scheduling.cluster.promises import PromiseBook
from scheduling.cluster.snapshot import ClusterSnapshot
from scheduling.model import SCHEDULER_NAME, Node, Pod, Resources, group_key
from scheduling.queues import (
    PREEMPTIBLE_LABEL,
    QUEUE_LABEL,
    FairShares,
    PendingGroup,
    Queue,
    QueueError,
    QueueState,
    QueueTree,
    RunningGang,
    fair_shares,
    is_preemptible,
    queue_states,
)
from scheduling.queues.lines import PendingLines
from scheduling.queues.ordering import order_lines
from scheduling.quota_owner import by_kueue, kueue_groups
from scheduling.resources import ZERO, minus, plus, total


@dataclass(frozen=True, slots=True)
class QueueView:
    """Queues at one moment.

    Attributes:
        tree: the queues in force, and those set aside with their reasons (``tree.rejected``).
        problems: one sentence per queue set aside (empty when every queue is in force).
        capacity: what queues divide: ready nodes' allocatable minus what other schedulers' pods hold.
        free: capacity not held by queue workloads nor promised.
        shares: deserved quota and fair share per queue.
        states: per queue, shares and allocation, parents linked.
        pending: pending groups in the order they get their turn.
        running: groups holding resources now.
        misplaced: pods whose label names a queue that cannot hold workloads (none such, set aside, or a
            parent queue), with the reason; what they hold comes off the capacity.
        counted: UIDs of the pods counted in the queues' allocations.
        positions: each pending group's index in ``pending`` (made when first read).
        kueue: the gangs whose quota Kueue owns (``scheduling.quota_owner.kueue_groups``).
        lines: each queue's pending groups, sorted by ``within_queue_key`` (what ``pending`` was ordered
            from, so that a caller adding one group orders it again without sorting every line).
        running_pods: by leaf queue, the pods holding resources charged to it (UID -> pod): what
            priority preemption inside a queue may take (``scheduling.admission.preemption_room``).
        source: the snapshot and promises the view was built from (``view_of``), so that a decision that
            read this view can be saved and replayed with exactly the view it read.
    """

    tree: QueueTree
    problems: tuple[str, ...]
    capacity: Resources
    free: Resources
    shares: FairShares
    states: Mapping[str, QueueState]
    pending: tuple[PendingGroup, ...]
    running: tuple[RunningGang, ...]
    misplaced: Mapping[str, str]
    counted: frozenset[str] = frozenset()
    positions: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))
    kueue: frozenset[str] = frozenset()
    lines: Mapping[str, Sequence[PendingGroup]] = field(
        default_factory=lambda: MappingProxyType({}), compare=False, repr=False
    )
    running_pods: Mapping[str, Mapping[str, Pod]] = field(
        default_factory=lambda: MappingProxyType({}), compare=False
    )
    source: tuple[ClusterSnapshot, PromiseBook] | None = field(default=None, compare=False)

    def state_of(self, group: PendingGroup) -> QueueState:
        """The state of ``group``'s queue."""
        return self.states[group.queue]

    def ahead_of(
        self,
        key: str,
        free: Resources | None = None,
        *,
        limit: int = 64,
        keep: Callable[[PendingGroup], bool] | None = None,
    ) -> tuple[PendingGroup, ...]:
        """The first ``limit`` pending groups before ``key`` that could start now (each fits ``free``).

        ``keep``, when given, further selects the groups that count (the gate's: those competing now).

        ``free`` defaults to the view's free room; a caller with fresher numbers passes them. A group not
        in the view (created since it was built) queues behind every group the view has, until the next
        build gives it its place: it must not jump the line for the second or so the view lags. The scan
        stops early: the head of the line is what goes next, and a filter call must not walk 50,000
        pending groups.
        """
        position = self.positions.get(key, len(self.pending))
        room = self.free if free is None else free
        ahead: list[PendingGroup] = []
        for group in self.pending[:position]:
            if _within(group.requests, room) and (keep is None or keep(group)):
                ahead.append(group)
                if len(ahead) >= limit:
                    break
        return tuple(ahead)


def pending_of(view: QueueView, name: str) -> Resources:
    """What the pending groups of queue ``name`` and of every queue below it request, summed.

    Groups wait in leaves only, so a parent queue's pending is the sum of its leaves'. The Queue
    status and the placement manager's metrics both report this one figure.
    """
    return total(g.requests for g in view.pending if name in view.tree.path(g.queue))


def _within(a: Resources, b: Resources) -> bool:
    return a.milli_cpu <= b.milli_cpu and a.memory <= b.memory and a.gpus <= b.gpus


def view_of(snapshot: ClusterSnapshot, promises: PromiseBook) -> QueueView:
    """The view of ``snapshot`` after ``promises``.

    Finished pods (a placement manager's snapshot keeps them) hold nothing and wait for nothing. Only the
    pods the queue rules walk are walked (``ClusterSnapshot.queue_pod_list``); every other live pod is
    in one sum (``held_elsewhere``), so the cost follows phalanx's live pods, not every pod kept.
    """
    view = build_queue_view(
        snapshot.queue_list(),
        snapshot.nodes.values(),
        snapshot.queue_pod_list(),
        promises,
        elsewhere=snapshot.held_elsewhere(),
    )
    return replace(view, source=(snapshot, promises))


def build_queue_view(
    queues: Sequence[Queue],
    nodes: Iterable[Node],
    pods: Iterable[Pod],
    promises: PromiseBook,
    *,
    elsewhere: Resources = ZERO,
) -> QueueView:
    """Build the view from every node and live pod (see the module docstring for the rules).

    ``elsewhere`` is what live pods left out of ``pods`` hold (pods of other schedulers: it only comes
    off the capacity). A pod in no queue (its queue is set aside or does not exist) is like them: what it
    holds comes off the capacity, so that every other queue's shares are what they would be without the
    queue it names.
    """
    tree = QueueTree.build(queues)
    capacity = minus(total(n.allocatable for n in nodes if n.takes_pods), elsewhere)
    # Sums kept as [milli_cpu, memory, gpus] while walking every pod (a Resources per pod added would
    # be one object per pod); the same totals, in the same order of queues, as Resources afterwards.
    held: dict[str, list[int]] = {}
    held_np: dict[str, list[int]] = {}
    running: dict[str, list[Pod]] = {}
    by_queue: dict[str, dict[str, Pod]] = {}
    waiting: dict[str, list[Pod]] = {}
    misplaced: dict[str, str] = {}
    counted: set[str] = set()
    promised = promises.by_uid
    workload_queue = tree.workload_queue
    pods = pods if isinstance(pods, list) else list(pods)
    kueue = kueue_groups(pods)
    for pod in pods:
        # Another scheduler's pod, or one whose quota Kueue owns (docs/kueue.md): it charges no queue of
        # phalanx's (no double accounting) and waits in none; what it holds only comes off the capacity.
        if pod.scheduler_name != SCHEDULER_NAME or by_kueue(pod, kueue):
            if pod.holds_resources:
                capacity = minus(capacity, pod.requests)
            continue
        labels = pod.labels
        try:
            queue = workload_queue(labels.get(QUEUE_LABEL))
        except QueueError as exc:
            misplaced[pod.key] = str(exc)
            if pod.holds_resources:
                capacity = minus(capacity, pod.requests)
            continue
        holds = pod.holds_resources
        if holds or pod.uid in promised:
            counted.add(pod.uid)
            _add(held, queue, pod.requests)
            if not is_preemptible(pod.priority, labels.get(PREEMPTIBLE_LABEL)):
                _add(held_np, queue, pod.requests)
        if holds:
            running.setdefault(group_key(pod), []).append(pod)
            by_queue.setdefault(queue, {})[pod.uid] = pod
        elif pod.node_name is None and not pod.terminating and pod.uid not in promised:
            waiting.setdefault(group_key(pod), []).append(pod)
    gangs = tuple(running_gang(key, members, tree) for key, members in sorted(running.items()))
    lines = PendingLines.of(waiting, tree)
    view = assemble_view(
        tree, capacity, held, held_np, gangs, lines.lines(), lines.sums(), misplaced, counted
    )
    return replace(view, kueue=kueue, running_pods=MappingProxyType(by_queue))


def assemble_view(
    tree: QueueTree,
    capacity: Resources,
    held: Mapping[str, Sequence[int]],
    held_np: Mapping[str, Sequence[int]],
    running: tuple[RunningGang, ...],
    lines: Mapping[str, Sequence[PendingGroup]],
    waiting_sums: Mapping[str, Resources],
    misplaced: Mapping[str, str],
    counted: Iterable[str],
) -> QueueView:
    """The view from what the pods add up to (``build_queue_view`` walks them; ``QueueTally`` keeps them).

    Args:
        tree: the queues in force.
        capacity: what the queues divide (other schedulers' and Kueue's pods already taken off).
        held: per queue, [milli_cpu, memory, gpus] its pods hold; a queue is listed once one pod holds
            anything there, even nothing.
        held_np: the same for its non-preemptible pods.
        running: the groups holding resources, by key (``running_gang``).
        lines: per queue, its pending groups sorted by ``within_queue_key`` (``PendingLines``).
        waiting_sums: per queue, what its pending groups request, summed.
        misplaced: pod key -> why its queue label names no queue that holds workloads.
        counted: the UIDs of the pods counted in ``held``.
    """
    allocated = {queue: Resources(*sums) for queue, sums in held.items()}
    non_preemptible = {queue: Resources(*sums) for queue, sums in held_np.items()}
    demand = dict(allocated)
    for queue in sorted(waiting_sums):
        demand[queue] = plus(demand.get(queue, ZERO), waiting_sums[queue])
    shares = fair_shares(tree, capacity, demand)
    states = queue_states(tree, shares, allocated, non_preemptible)
    free = minus(capacity, total(allocated.values()))
    kept = MappingProxyType({queue: tuple(line) for queue, line in lines.items() if line})
    ordered = order_lines(kept, states, capacity)
    return QueueView(
        tree=tree,
        problems=tree.problems,
        capacity=capacity,
        free=free,
        shares=shares,
        states=states,
        pending=ordered,
        running=running,
        misplaced=MappingProxyType(dict(misplaced)),
        counted=frozenset(counted),
        positions=Positions(ordered),
        lines=kept,
    )


class Positions(Mapping[str, int]):
    """Each pending group's index in an order, made when first read (most views are never asked)."""

    __slots__ = ("_index", "_order")

    def __init__(self, order: Sequence[PendingGroup]) -> None:
        self._order = order
        self._index: dict[str, int] | None = None

    def _made(self) -> dict[str, int]:
        if self._index is None:
            self._index = {g.key: i for i, g in enumerate(self._order)}
        return self._index

    def __getitem__(self, key: str) -> int:
        return self._made()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._made())

    def __len__(self) -> int:
        return len(self._order)


def _add(sums: dict[str, list[int]], queue: str, requests: Resources) -> None:
    into = sums.get(queue)
    if into is None:
        into = sums[queue] = [0, 0, 0]
    into[0] += requests.milli_cpu
    into[1] += requests.memory
    into[2] += requests.gpus


def running_gang(key: str, members: Sequence[Pod], tree: QueueTree) -> RunningGang:
    """The running group ``key`` of ``members`` (those holding resources), charged to its queue."""
    if len(members) == 1:  # a pod on its own (most running groups): the same figures without the folds
        (pod,) = members
        return RunningGang(
            key=key,
            queue=tree.workload_queue(pod.labels.get(QUEUE_LABEL)),
            requests=pod.requests,
            preemptible=is_preemptible(pod.priority, pod.labels.get(PREEMPTIBLE_LABEL)),
            priority=pod.priority,
            started_at=pod.started_at or 0.0,
        )
    first = min(members, key=lambda p: p.name)
    return RunningGang(
        key=key,
        queue=tree.workload_queue(first.labels.get(QUEUE_LABEL)),
        requests=total(m.requests for m in members),
        preemptible=all(is_preemptible(m.priority, m.labels.get(PREEMPTIBLE_LABEL)) for m in members),
        priority=max(m.priority for m in members),
        started_at=max((m.started_at or 0.0) for m in members),
    )
