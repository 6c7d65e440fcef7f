"""What a starving gated group keeps: the nodes it will start on, and only if it can start at all.

``scheduling.admission.release`` is work-conserving: a group that does not fit now is skipped and the
groups behind it may go. The first skipped group that has waited longer than ``starve_after`` would then
starve behind a stream of small ones, so it keeps room from them. Which room matters:

- **Only what can be placed.** A group that cannot be placed even on the cluster's schedulable nodes
  emptied (one pod of 9 GPUs on 8-GPU nodes, or of 5,000 GPUs) can never start on this cluster as it
  is. It keeps nothing, so it cannot stall every group behind it for ever; its sentence says why, and
  the next starving group may keep room instead. ``Capacity.shortfall`` is the cheap test every group
  kept for room gets (the largest node, the whole cluster); ``never_fits`` is the whole one (the gang
  planner on the emptied nodes, with the group's taints, selectors and affinity), run for the group
  about to keep room.
- **Nodes, not a count.** A count kept "somewhere" idled GPUs on nodes the starving group could never
  use and let the groups behind it take the very node it waits for. ``reserve`` picks the nodes like a
  plan on emptied nodes: members largest first, each to the allowed node with the most free GPUs now
  whose whole capacity, less the members put there already, takes it (ties by name), so the group
  waits for the nodes nearest to holding it. Nothing behind it is placed there; the free GPUs on those
  nodes count as kept, and every other node serves the groups behind it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from scheduling.cluster.promises import PromiseBook
from scheduling.cluster.room import NodeRoom
from scheduling.cluster.snapshot import ClusterSnapshot
from scheduling.cluster.statement import Statement
from scheduling.gang.gang_planner import GangPlan, plan_gang
from scheduling.model import Node, Pod
from scheduling.topology import TopologyCache


@dataclass(frozen=True, slots=True)
class Reservation:
    """The nodes a starving group keeps from the groups behind it.

    Attributes:
        group: the starving group.
        nodes: the nodes nothing behind it is placed on.
        gpus: the GPUs free on those nodes now (what it keeps from the room count), at most its need.
        waited: how long it has waited, for the sentences.
    """

    group: str
    nodes: frozenset[str]
    gpus: int
    waited: float


@dataclass(frozen=True, slots=True)
class Capacity:
    """The GPUs of the schedulable nodes: of the largest one, and of all of them."""

    largest: int
    whole: int

    @staticmethod
    def of(nodes: Iterable[Node]) -> Capacity:
        """The capacity of the ready, uncordoned ones among ``nodes``."""
        sizes = [n.gpu_total for n in nodes if n.takes_pods]
        return Capacity(max(sizes, default=0), sum(sizes))

    def shortfall(self, pods: Sequence[Pod], nodes: str = "the schedulable nodes") -> str | None:
        """Why ``pods`` can never fit this capacity, or ``None``: the cheap test, one pass over ``pods``.

        >>> from scheduling.model import Resources
        >>> Capacity(8, 64).shortfall([Pod("u", "ml", "p", Resources(gpus=9))])
        'a pod needs 9 GPUs on one node; the largest of the schedulable nodes offers 8'
        """
        biggest = max((p.requests.gpus for p in pods), default=0)
        if biggest > self.largest:
            return f"a pod needs {biggest} GPUs on one node; the largest of {nodes} offers {self.largest}"
        need = sum(p.requests.gpus for p in pods)
        if need > self.whole:
            return f"it needs {need} GPUs; {nodes} offer {self.whole} in all"
        return None


def never_fits(
    key: str,
    pods: Sequence[Pod],
    nodes: Sequence[str],
    snapshot: ClusterSnapshot,
    topologies: TopologyCache,
) -> str | None:
    """Why ``pods`` cannot be placed even on ``nodes`` emptied of every pod; ``None`` when they can."""
    cheap = Capacity.of(snapshot.nodes[n] for n in nodes).shortfall(pods, "the nodes it may use")
    if cheap is not None:
        return cheap
    emptied = ClusterSnapshot(nodes=snapshot.nodes)
    plan = plan_gang(key, pods, nodes, emptied, PromiseBook(), topologies, statement=Statement(emptied))
    return None if isinstance(plan, GangPlan) else f"even on emptied nodes: {plan.message}"


def reserve(key: str, pods: Sequence[Pod], rooms: Mapping[str, NodeRoom], waited: float) -> Reservation:
    """The nodes ``pods`` of starving group ``key`` keep, chosen on ``rooms`` (their allowed nodes now).

    The caller has checked that the group fits the emptied nodes (``never_fits``); a member no node's
    capacity takes is left out of the choice rather than failing it.
    """
    order = sorted(rooms, key=lambda n: (-rooms[n].count, n))
    capacity = {n: rooms[n].node.gpu_total for n in order}
    chosen: set[str] = set()
    for pod in sorted(pods, key=lambda p: (-p.requests.gpus, p.name)):
        need = pod.requests.gpus
        if not need:  # a CPU-only member (an MPI launcher) goes wherever there is CPU
            continue
        node = next((n for n in order if capacity[n] >= need), None)
        if node is not None:
            capacity[node] -= need
            chosen.add(node)
    kept = min(sum(rooms[n].count for n in chosen), sum(p.requests.gpus for p in pods))
    return Reservation(key, frozenset(chosen), kept, waited)
