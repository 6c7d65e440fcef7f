"""Nodes a gang does not use yet, in the gang planner's order, kept on a ``Statement`` across plans.

The release pass plans every group it releases on one ``Statement``, so that fragmentation counts. At
1,000 nodes, ranking every node for each group's member shape was most of the pass, though one plan
changes a few nodes. Kept on the statement (``Statement.memo``) per member GPU count, allowed nodes
and preferred domain, the order is built once; a later plan looks again only at the nodes the
statement changed since (``Statement.changed_since``), as ``scheduling.nodes.rank_index`` does across
snapshots. The order is the planner's rule (``scheduling.gang.gang_planner``): nodes in the preferred
domain first, then the fewest GPUs left (best fit), then the name.

The order holds every node with the GPUs for the shape, and CPU and memory are checked while walking
it: the rule's order depends on the GPU count alone, and real members' CPU and memory requests vary
from one job to the next, so an order per exact request would be built again, O(nodes), for nearly
every gang.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from scheduling.cluster.room import NodeRoom
from scheduling.cluster.statement import Statement
from scheduling.keyed_order import place
from scheduling.model import Node, Pod

Entry = tuple[int, int, str, NodeRoom]
"""(1 if outside the preferred domain, GPUs the node would have left, name, its room): names differ, so
the room is never compared; its CPU, memory and domain are read only for the entries a choice looks at."""


def domain_of(node: Node, keys: Sequence[str]) -> tuple[str, ...]:
    """The node's value of each locality label (``""`` where it has none), innermost first."""
    return tuple(node.labels.get(key, "") for key in keys)


@dataclass
class FreshOrder:
    """Every allowed node a member of one shape fits, by ``Entry``; mutable: the statement's memo."""

    seen: int
    """The statement's change count when the order was last brought up to date."""
    keys: dict[str, Entry]
    order: list[Entry]

    def best(
        self, pod: Pod, used: frozenset[str], used_domains: set[tuple[str, ...]], keys: Sequence[str]
    ) -> str | None:
        """The first node that ``pod`` fits and the gang does not use yet, in a domain the gang uses if any.

        Only within the first entry's domain class: a node outside the preferred domain never wins over
        one inside it.
        """
        first: Entry | None = None
        for entry in self.order:
            if entry[2] in used or not entry[3].fits(pod):
                continue
            if first is None:
                first = entry
                if not used_domains:
                    break
            elif entry[0] != first[0]:
                break
            if domain_of(entry[3].node, keys) in used_domains:
                return entry[2]
        return first[2] if first is not None else None


def fresh_order(
    work: Statement,
    pod: Pod,
    allowed: frozenset[str],
    domain: tuple[str, str] | None,
) -> FreshOrder:
    """The order for ``pod``'s GPU count on ``work``, up to date with it.

    Args:
        work: the statement the gang is planned on; the order is kept in its memo.
        pod: the member to place (its GPU count makes the shape; ``FreshOrder.best`` checks the rest).
        allowed: the nodes it may go to.
        domain: the gang's preferred (label, value), if any.
    """
    gpus = pod.requests.gpus
    shape = ("gang-fresh-order", gpus, allowed, domain)
    mark = work.changes()
    found = work.memo.get(shape)
    if isinstance(found, FreshOrder):
        if found.seen != mark:
            for name in dict.fromkeys(work.changed_since(found.seen)):
                room = work.room(name) if name in allowed else None
                place(
                    found.keys, found.order, name, None if room is None else _entry(name, room, gpus, domain)
                )
            found.seen = mark
        return found
    entries = {
        name: entry
        for name in allowed
        if (room := work.room(name)) is not None and (entry := _entry(name, room, gpus, domain)) is not None
    }
    made = FreshOrder(mark, entries, sorted(entries.values()))
    work.memo[shape] = made
    return made


def _entry(name: str, room: NodeRoom, gpus: int, domain: tuple[str, str] | None) -> Entry | None:
    """The node's place in the order for ``gpus``, or ``None`` when it has not those GPUs for a pod."""
    if gpus and (room.node.topology_problem is not None or room.count < gpus):
        return None  # as ``NodeRoom.fits`` turns it down, whatever the member's CPU and memory
    outside = 0 if domain is None or room.node.labels.get(domain[0]) == domain[1] else 1
    return outside, room.count - gpus, name, room
