"""A working copy of one snapshot's room, on which planners try their "what if" (KAI's Statement).

Planners never edit a snapshot: they open a ``Statement`` on it, ``assign``, ``evict``, ``move`` and
``resize`` on the working copy, take a ``checkpoint`` before a tentative step and ``rollback`` to it
when the step fails, and ``commit`` the actions they keep as one ``Plan``
(``scheduling.plan``). The gang planner places a gang on it, reclaim checks on it whether a waiting
gang fits once its victims are gone, and the elastic planner will resize and move workers on it: one
accounting of room, written once.

Room per node follows ``scheduling.resources``' one rule: a node that is gone, cordoned or not ready
has none; GPU indices are free when no live pod and no promise holds them, less the GPUs of pods
without an index annotation; CPU and memory are what is left after live pods and promises, and
constrain only when the node declares them.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Protocol

from scheduling.cluster.held import HeldPlans
from scheduling.cluster.ledger import PodLedger
from scheduling.cluster.promises import PromiseBook
from scheduling.cluster.room import NodeRoom
from scheduling.cluster.snapshot import ClusterSnapshot
from scheduling.model import Node, Pod
from scheduling.plan import Action, Assignment, Eviction, Migration, Plan, Resize
from scheduling.resources import node_left, plus

_NO_BOOK = PromiseBook()
_SERIALS = itertools.count()


class MemoEntry(Protocol):
    """A ``Statement.memo`` entry: built from the statement's rooms, up to date as of ``changes()`` then."""

    seen: int


class Statement:
    """Tentative actions on a working copy of ``snapshot`` after ``promises``.

    ``after``: the statement of an earlier pass (on an older snapshot of the same cluster state, or
    this one), whose planners' memos this one starts from (``carry``). It must not be used again.
    """

    def __init__(
        self, snapshot: ClusterSnapshot, promises: PromiseBook = _NO_BOOK, *, after: Statement | None = None
    ) -> None:
        self.snapshot = snapshot
        self.promises = promises
        self._rooms: dict[str, NodeRoom | None] = {}
        self._actions: list[Action] = []
        self._undo: list[tuple[str, NodeRoom | None]] = []
        self._changed: list[str] = []
        self._start = 0  # ``_changed`` before it is what ``carry`` owed; the seeds' and own changes follow
        self._acted = 0  # ``_changed`` from it on is what this statement's own actions changed
        self.memo: dict[object, MemoEntry] = {}
        """Planners' orders of this statement's nodes, kept across plans (``scheduling.gang.fresh_order``);
        each brings itself up to date from ``changed_since``."""
        self.node_memo: dict[object, object] = {}
        """What passes derive from the node objects alone (sorted names, capacity, the nodes a pod's
        constraints allow): carried to a later statement while no node object changed."""
        self.serial = next(_SERIALS)
        """This statement's number, unique in the process."""
        self.after = None if after is None else after.serial
        """The number of the statement this one was carried from (``HeldPlans.hold`` asks)."""
        self.held: HeldPlans = HeldPlans() if after is None else after.held
        """The plans of pods in flight held on the rooms (``scheduling.cluster.held``), carried along."""
        self.ledger: PodLedger = PodLedger() if after is None else after.ledger
        """The unbound pods of the queues grouped (``scheduling.cluster.ledger``), carried along."""
        if after is not None:
            carry(after, self)

    # -- reading -----------------------------------------------------------------------------------

    def room(self, name: str) -> NodeRoom | None:
        """What ``name`` has left now, or ``None`` for a node that is gone, cordoned or not ready."""
        try:
            return self._rooms[name]
        except KeyError:
            room = self._rooms[name] = self._initial(name)
            return room

    def rooms(self, names: Iterable[str]) -> dict[str, NodeRoom]:
        """The rooms of ``names`` that exist, by name, sorted."""
        found = {}
        for name in sorted(set(names)):
            room = self.room(name)
            if room is not None:
                found[name] = room
        return found

    def changes(self) -> int:
        """How many times a node's room changed in this statement (a mark for ``changed_since``)."""
        return len(self._changed)

    def changed_since(self, mark: int) -> list[str]:
        """The nodes whose room changed after ``mark`` (``changes()`` then), in order, with repeats."""
        return self._changed[mark:]

    def seed(self, rooms: Mapping[str, NodeRoom | None], changed: Iterable[str]) -> None:
        """Start these nodes from ``rooms`` instead of the snapshot's, before any action or read of them.

        ``HeldPlans`` seeds the rooms after the plans in flight; ``changed`` are the nodes whose seeded
        room differs from what the statement this one was carried from had, so that memos look again.
        """
        self._rooms.update(rooms)
        self._changed.extend(sorted(changed))
        self._acted = len(self._changed)

    def base_room(self, name: str) -> NodeRoom | None:
        """``name``'s room from the snapshot and the promises alone, whatever was seeded or acted on."""
        return self._initial(name)

    def _initial(self, name: str) -> NodeRoom | None:
        snapshot, promises = self.snapshot, self.promises
        if snapshot.open_rooms is not None and name not in promises.requested_by_node:
            return snapshot.open_rooms.get(name)  # nothing promised here: the state keeps this room
        node = snapshot.nodes.get(name)
        free = snapshot.free_on(name, promises)
        if node is None or free is None or not node.takes_pods:
            return None
        usage = snapshot.usage_of(name)
        left = node_left(node, usage.requested, promises.requested_on(name))
        return NodeRoom(node, free.indices, usage.unindexed, left)

    # -- acting ------------------------------------------------------------------------------------

    def assign(self, pod: Pod, node: str, gpus: tuple[int, ...], reason: str = "") -> None:
        """Put ``pod`` on ``node`` with ``gpus``.

        Raises:
            ValueError: the node has no room, or not these GPUs.
        """
        self._take(pod, node, gpus)
        self._actions.append(Assignment(pod.key, pod.uid, node, gpus, reason))

    def evict(self, pod: Pod, reason: str = "", *, group: str = "") -> None:
        """Take ``pod`` off its node: what it held is free in the working copy.

        ``group``: the gang it leaves with, whole (``Eviction.group``).
        """
        node = pod.node_name or ""
        self._give_back(pod)
        self._actions.append(Eviction(pod.key, pod.uid, node, reason, group))

    def move(self, pod: Pod, target: str, gpus: tuple[int, ...], reason: str = "") -> None:
        """Move running ``pod`` to ``target`` with ``gpus``.

        Raises:
            ValueError: the target has no room for it, or not these GPUs.
        """
        mark = self.checkpoint()
        self._give_back(pod)
        try:
            self._take(pod, target, gpus)
        except ValueError:
            self.rollback(mark)
            raise
        self._actions.append(Migration(pod.key, pod.uid, pod.node_name or "", target, gpus, reason))

    def resize(
        self, job: str, before: int, after: int, reason: str = "", removed: Iterable[Pod] = ()
    ) -> None:
        """Record that elastic ``job`` goes from ``before`` to ``after`` workers (its pods follow).

        ``removed`` are the workers a shrink deletes: their room is free in the working copy, so a move
        into it can be planned in the same round (it lands when they are gone).
        """
        for pod in removed:
            self._give_back(pod)
        self._actions.append(Resize(job, before, after, reason))

    # -- checkpoints -------------------------------------------------------------------------------

    def checkpoint(self) -> tuple[int, int]:
        """A mark to roll back to."""
        return len(self._actions), len(self._undo)

    def rollback(self, mark: tuple[int, int]) -> None:
        """Undo every action since ``mark``."""
        actions, undo = mark
        while len(self._undo) > undo:
            name, before = self._undo.pop()
            self._rooms[name] = before
            self._changed.append(name)
        del self._actions[actions:]

    def commit(self) -> Plan:
        """The actions kept, as one plan."""
        return Plan(tuple(self._actions))

    def plan_since(self, mark: tuple[int, int]) -> Plan:
        """The actions kept since ``mark``, as one plan: a planner's own part of a shared statement."""
        return Plan(tuple(self._actions[mark[0] :]))

    # -- room arithmetic ---------------------------------------------------------------------------

    def _set(self, name: str, room: NodeRoom | None) -> None:
        self._undo.append((name, self.room(name)))
        self._rooms[name] = room
        self._changed.append(name)

    def _take(self, pod: Pod, name: str, gpus: tuple[int, ...]) -> None:
        room = self.room(name)
        taken = None if room is None else room.taking(pod, gpus)
        if taken is None:
            msg = f"{pod.key} does not fit node {name} with GPUs {list(gpus)} in this plan"
            raise ValueError(msg)
        self._set(name, taken)

    def _give_back(self, pod: Pod) -> None:
        name = pod.node_name
        room = None if name is None else self.room(name)
        if name is None or room is None or not pod.holds_resources or pod.key in room.gone:
            return
        gone = room.gone | {pod.key}
        need, indices = pod.requests, pod.gpu_indices
        free, unindexed = room.free, room.unindexed
        if need.gpus and (indices is None or len(indices) != need.gpus):
            unindexed = max(0, unindexed - need.gpus)
        elif need.gpus and indices is not None:
            holders = self.snapshot.usage_of(name).holders
            promised = self.promises.on_node(name)
            free = free | {
                i for i in indices if i not in promised and all(k in gone for k in holders.get(i, ()))
            }
        self._set(
            name,
            replace(
                room,
                free=free,
                unindexed=unindexed,
                left=plus(room.left, need),
                gone=gone,
            ),
        )


class StatementChain:
    """The statement a series of decisions last worked on, which the next one starts from (``carry``).

    Not thread-safe: the caller holds one lock around ``open`` and the statement's use (the release
    pass and the admission door share one).
    """

    def __init__(self) -> None:
        self._last: Statement | None = None
        self.ledger = PodLedger()
        """The unbound pods grouped, kept across the chain's decisions (each statement carries it)."""

    def open(self, snapshot: ClusterSnapshot, promises: PromiseBook = _NO_BOOK) -> Statement:
        """A statement on ``snapshot`` after ``promises``, carried from the last one opened."""
        self._last = Statement(snapshot, promises, after=self._last)
        self._last.ledger = self.ledger
        return self._last


MEMO_LIMIT = 32
"""Memo entries carried at most, those owing the fewest nodes first (a pod shape seen once is let go)."""

CARRY_LIMIT = 512
"""Nodes, at most, a carried memo entry may have to look at again; past it, rebuilding costs as much."""


def carry(previous: Statement, work: Statement) -> None:
    """Start ``work``'s memos from ``previous``'s: each then looks again only at the nodes that differ.

    A memo entry of ``previous`` reflects its working copy as of the entry's ``seen`` mark: the snapshot
    it was opened on, plus the actions taken by then. On ``work``'s snapshot the two differ on the nodes
    the cluster state changed in between (``ClusterSnapshot.changes``), the nodes ``previous``'s own
    actions touched, the nodes with a promise in either book, and, for an entry ``previous`` never
    used, the nodes it had not caught up with yet. ``work`` starts with those nodes changed, the ones
    only such stale entries owe first, and each entry's mark set so that its first use looks again at
    exactly what it owes. The release pass and the admission door open a statement per decision;
    without this, each ranked and summed every node again (most of a decision at 5,000 nodes).

    Nothing is carried across a change log that does not cover the span (a relist, a trimmed log, another
    cluster state, an older snapshot); an entry more than ``CARRY_LIMIT`` nodes behind is dropped, and
    at most ``MEMO_LIMIT`` entries are carried.
    ``node_memo`` is carried only while every changed node's object is equal in both snapshots.
    """
    old, new = previous.snapshot, work.snapshot
    log = new.changes
    if log is None or log is not old.changes or new.version < old.version:
        return
    between = log.since(old.version, new.version)
    if between is None:
        return
    # The rooms ``previous`` was seeded with are not its own changes: ``work`` is seeded by the same
    # ``HeldPlans`` before it is read, which names every node whose seeded room differs from
    # ``previous``'s (``Statement.seed``), so a memo looks again at those and only those.
    common = set(between) | set(previous._changed[previous._acted :])
    for book in (previous.promises, work.promises):
        common.update(book.by_node, book.requested_by_node)
    if len(common) > CARRY_LIMIT:
        return
    owing = sorted(
        (len(owed), n, key, owed)
        for n, (key, entry) in enumerate(previous.memo.items())
        if len(owed := set(previous._changed[entry.seen :]) - common) + len(common) <= CARRY_LIMIT
    )[:MEMO_LIMIT]
    stale = {key: owed for _, _, key, owed in owing}
    first = sorted(set().union(*stale.values()))
    for key in stale:
        entry = previous.memo[key]
        entry.seen = 0 if stale[key] else len(first)
        work.memo[key] = entry
    work._changed = [*first, *sorted(common)]
    work._start = work._acted = len(work._changed)
    if all(_same(old.nodes.get(name), new.nodes.get(name)) for name in between):
        work.node_memo = previous.node_memo


def _same(a: Node | None, b: Node | None) -> bool:
    """Whether two versions of a node are alike in every field, its labels too (equality leaves them out)."""
    if a is None or b is None:
        return a is b
    return a is b or (a == b and a.labels == b.labels)
