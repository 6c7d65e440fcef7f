"""Free GPUs per locality domain among a gang's candidate nodes, kept on a ``Statement`` across plans.

The gang planner prefers the innermost domain (rack, then zone) whose candidate nodes have free GPUs
for the whole gang. Summing every candidate's free GPUs per domain for every gang was a walk of every
node per plan; kept on the statement (``Statement.memo``) per candidate set and locality labels, the
sums are built once and changed only for the nodes the statement changed since
(``Statement.changed_since``), like ``scheduling.gang.fresh_order``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from scheduling.cluster.statement import Statement


@dataclass
class DomainRoom:
    """Per locality label, the free GPUs of each of its values; mutable: the statement's memo."""

    seen: int
    """The statement's change count when the sums were last brought up to date."""
    keys: tuple[str, ...]
    by_node: dict[str, tuple[tuple[str, ...], int]]
    """Each counted node's label values (``""`` where it has none) and free GPUs."""
    free: tuple[dict[str, int], ...]
    """Per label of ``keys``, free GPUs by value."""

    def preferred(self, total_gpus: int) -> tuple[str, str] | None:
        """(label, value) of the innermost domain with free GPUs for ``total_gpus``, tightest first."""
        for key, free in zip(self.keys, self.free, strict=True):
            fitting = sorted((count, value) for value, count in free.items() if count >= total_gpus)
            if fitting:
                return key, fitting[0][1]
        return None

    def _count(self, name: str, values: tuple[str, ...], gpus: int, sign: int) -> None:
        for value, free in zip(values, self.free, strict=True):
            if value:
                left = free.get(value, 0) + sign * gpus
                if left:
                    free[value] = left
                else:
                    free.pop(value, None)  # a domain with nothing free is absent, however it came to be
        if sign > 0:
            self.by_node[name] = (values, gpus)


def domain_room(work: Statement, candidates: frozenset[str], keys: Sequence[str]) -> DomainRoom:
    """The sums for ``candidates`` on ``work``, up to date with it."""
    shape = ("gang-domain-room", candidates, tuple(keys))
    mark = work.changes()
    found = work.memo.get(shape)
    if isinstance(found, DomainRoom):
        if found.seen != mark:
            for name in dict.fromkeys(work.changed_since(found.seen)):
                if name in candidates:
                    _recount(found, work, name)
            found.seen = mark
        return found
    made = DomainRoom(mark, tuple(keys), {}, tuple({} for _ in keys))
    for name in sorted(candidates):
        _recount(made, work, name)
    work.memo[shape] = made
    return made


def _recount(sums: DomainRoom, work: Statement, name: str) -> None:
    old = sums.by_node.pop(name, None)
    if old is not None:
        sums._count(name, old[0], old[1], -1)
    room = work.room(name)
    if room is not None:
        values = tuple(room.node.labels.get(key) or "" for key in sums.keys)
        sums._count(name, values, room.count, 1)
