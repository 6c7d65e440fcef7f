"""Plans held on the rooms: each node's room after the pods planned on it and not bound yet take their GPUs.

With plans carried on pods (the framework sidecar: docs/design/framework-sidecar.md), kube-scheduler
binds every pod released and not bound yet exactly where its plan says, so each gate decision must see
those GPUs taken. Putting every such pod back at its plan on each decision's fresh working copy cost
O(pods in flight) room arithmetic per decision: 37 ms for one door decision with 3,000 in flight at
1,000 nodes, against 0.3 ms with none, which is why the in-flight budget had to stay.

A node's held room changes only when the node's own room changes (the cluster state's change log names
it), a promise on it changes, or the pods planned on it change. So ``HeldPlans`` keeps each node's
result between decisions, works again only on those nodes, and seeds the working copy with the rooms
(``Statement.seed``). Which pods are planned where comes from ``scheduling.cluster.ledger``, kept per
pod change too.

On a node, the pods planned there are held in the order of their keys; one whose plan no longer fits
(a pod bound since took a planned GPU, the node shrank, two plans name one GPU) is broken, and the
caller plans it again. Not thread-safe: a statement chain's caller holds one lock.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from scheduling.cluster.change_log import ChangeLog
from scheduling.cluster.room import NodeRoom
from scheduling.model import Pod

if TYPE_CHECKING:
    from scheduling.cluster.statement import Statement


@dataclass(frozen=True, slots=True)
class NodeHold:
    """One node's holds: the pods planned on it (by key), its room after those that fit, and the rest."""

    pods: tuple[Pod, ...]
    room: NodeRoom | None
    broken: frozenset[str]


def hold_on(base: NodeRoom | None, pods: Sequence[Pod]) -> NodeHold:
    """``pods``' plans (all on ``base``'s node, by key) held on ``base`` in order: what fits and what not."""
    room, broken = base, set()
    for pod in pods:
        plan = pod.plan
        taken = None
        if room is not None and plan is not None and len(plan[1]) == pod.requests.gpus:
            taken = room.taking(pod, plan[1])
        if taken is None:
            broken.add(pod.key)
        else:
            room = taken
    return NodeHold(tuple(pods), room, frozenset(broken))


class HeldPlans:
    """The holds of the last decision, by node, and what they were computed against."""

    def __init__(self) -> None:
        self._nodes: dict[str, NodeHold] = {}
        self._log: ChangeLog | None = None
        self._version = -1
        self._promised: frozenset[str] = frozenset()
        self._last: int | None = None  # the serial of the statement last seeded

    def hold(self, work: Statement, planned: Mapping[str, Sequence[Pod]]) -> frozenset[str]:
        """Seed ``work`` with each node's room after the pods ``planned`` on it; the keys of those broken.

        Args:
            work: a statement nothing has read a room of or acted on yet.
            planned: by node, the pods whose plans to hold there, sorted by key.
        """
        snapshot, promises = work.snapshot, work.promises
        promised = frozenset(promises.by_node) | frozenset(promises.requested_by_node)
        log = snapshot.changes
        between = None
        if log is not None and log is self._log and snapshot.version >= self._version:
            between = log.since(self._version, snapshot.version)
        rebase = None if between is None else between | promised | self._promised
        before = self._nodes
        after: dict[str, NodeHold] = {}
        for node, pods in planned.items():
            kept = before.get(node)
            if kept is None or rebase is None or node in rebase or kept.pods != tuple(pods):
                kept = hold_on(work.base_room(node), pods)
            after[node] = kept
        carried = self._last is not None and work.after == self._last
        changed = [n for n in after if not carried or n not in before or before[n].room is not after[n].room]
        changed += [n for n in before if n not in after]
        work.seed({n: h.room for n, h in after.items()}, changed)
        self._nodes, self._log, self._version, self._promised = after, log, snapshot.version, promised
        self._last = work.serial
        return frozenset().union(*(h.broken for h in after.values() if h.broken))
