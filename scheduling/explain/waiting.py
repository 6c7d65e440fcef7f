"""Why a waiting pod or gang waits: the filter's own decision, then what capacity would let it run.

The filter is run exactly as the extender runs it (``scheduling.session.filter_pod``) for the nodes
kube-scheduler would send (``scheduling.explain.node_answers``). Its outcome decides the cause, in the
filter's own order: a queue rule holds the group (when kube-scheduler asks phalanx at all, i.e. some node
passed its own filters); the gang lacks its PodGroup or members; it fits now; else the nodes' room keeps it
waiting, and then the cause is the first that holds of:

- *excluded*: it would fit if taints, node selector or node affinity did not exclude nodes;
- *too large*: a member needs more GPUs on one node than any node it may use has;
- *fragmented*: the nodes it may use have enough free GPUs in all, but not where its pods need them;
- *no capacity*: fewer GPUs (or CPU, memory) are free than it needs.

"The nodes it may use" are the healthy ones no taint, selector or affinity excludes, whatever their room.
A queue rule that would hold the group as well is said after the capacity cause.

For the last two, ``scheduling.explain.freed_room`` names the running groups whose finishing makes room, and
the plan the gang planner would make then.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from scheduling.cluster.statement import Statement
from scheduling.explain.explanation import Cause, NodeGroup, PlacedPod, WhatIf
from scheduling.explain.freed_room import planned, room_once_finished
from scheduling.explain.node_answers import PLACEMENT_KINDS, unconstrained, usable
from scheduling.gpu.choice import choose_gpus
from scheduling.model import Pod
from scheduling.nodes.ranking import rank_nodes
from scheduling.queues import QueueRule
from scheduling.reasons import Rejection
from scheduling.session import FilterInput, FilterOutcome, SessionSettings, filter_pod
from scheduling.topology import TopologyCache

RULE_CAUSES = {
    QueueRule.LIMIT: Cause.QUEUE_LIMIT,
    QueueRule.NON_PREEMPTIBLE_QUOTA: Cause.NON_PREEMPTIBLE_QUOTA,
    QueueRule.HELD_FOR_AHEAD: Cause.HELD_FOR_AHEAD,
}


@dataclass(frozen=True, slots=True)
class Finding:
    """The cause, its one-line verdict and the plan that goes with it."""

    cause: Cause
    verdict: str
    what_if: WhatIf | None = None


def held_by_queue(name: str, outcome: FilterOutcome) -> Finding:
    """The queue rule that held the group, with the hold's own sentence."""
    hold = outcome.hold
    message = outcome.verdict.message if outcome.verdict is not None else ""
    if outcome.unknown_queue or hold is None or hold.rule is None:
        return Finding(Cause.UNKNOWN_QUEUE, f"{name} is held: {message}")
    return Finding(RULE_CAUSES[hold.rule], f"{name} is held by its queue: {message}")


def fits_now(
    name: str, pod: Pod, outcome: FilterOutcome, asked: FilterInput, topologies: TopologyCache
) -> Finding:
    """The filter accepts it now: the plan it would get (the gang's, or the best-ranked node's GPUs)."""
    if outcome.plan is not None:
        what_if = WhatIf((), 0, planned(outcome.plan))
        where = ", ".join(outcome.plan.nodes)
        line = f"{name} fits now: phalanx plans its {len(what_if.plan)} waiting pod(s) on {where}"
    else:
        snapshot, promises = asked.snapshot, asked.promises
        ranked = rank_nodes(pod, outcome.feasible, snapshot, promises, topologies)
        best = min(ranked, key=lambda r: (-r[1], r[0]))[0]  # kube-scheduler takes the highest score
        free = snapshot.free_on(best, promises)
        gpus = () if free is None else choose_gpus(snapshot.nodes[best], free, pod.requests.gpus, topologies)
        what_if = WhatIf((), 0, (PlacedPod(pod.name, best, gpus),))
        line = (
            f"{name} fits now: phalanx's filter accepts {len(outcome.feasible)} node(s), {best} ranked best"
        )
    return Finding(Cause.FITS_NOW, f"{line}; kube-scheduler places it at its next attempt", what_if)


def _needs(waiting: Sequence[Pod]) -> str:
    gpus = sorted((p.requests.gpus for p in waiting), reverse=True)
    if len(waiting) == 1:
        return f"{gpus[0]} GPUs on one node"
    sizes = f"{gpus[0]} per pod" if len(set(gpus)) == 1 else " + ".join(map(str, gpus))
    return f"{sum(gpus)} GPUs for {len(waiting)} pods ({sizes})"


def short_of_room(
    name: str,
    key: str,
    waiting: Sequence[Pod],
    asked: FilterInput,
    outcome: FilterOutcome,
    before: Mapping[str, Rejection],
    groups: Sequence[NodeGroup],
    *,
    topologies: TopologyCache,
    settings: SessionSettings,
) -> Finding:
    """The capacity cause (see the module docstring) for ``waiting``, the members the filter plans.

    Args:
        name: how sentences name the subject.
        key: the group's key (the pod's own for a pod alone).
        waiting: the members the filter plans together.
        asked: the filter's input (its candidates are kube-scheduler's).
        outcome: the filter's answer; a queue rule it names is added to the verdict (kube-scheduler did
            not ask phalanx when no node passed its own filters, but the rule would hold it next).
        before: the nodes turned down before phalanx, with their reasons.
        groups: every node grouped by reason, to name the exclusions.
        topologies: topology scoring cache.
        settings: the filter's settings.
    """
    snapshot, promises, pod = asked.snapshot, asked.promises, asked.pod
    also = ""
    if outcome.hold is not None and outcome.hold.held is not None:
        also = f"; its queue would hold it too: {outcome.hold.held}"
    wider = unconstrained(pod, snapshot)
    if wider != asked.candidates:
        kept_out = filter_pod(replace(asked, candidates=wider), topologies=topologies, settings=settings)
        if kept_out.feasible:
            said = "; ".join(g.text for g in groups if g.kind in {k.value for k in PLACEMENT_KINDS})
            line = (
                f"{name} waits: the nodes with room for it are excluded by kube-scheduler's filters ({said})"
            )
            return Finding(Cause.EXCLUDED, line + also)
    nodes = usable(snapshot, before)
    if not nodes:
        line = f"{name} waits: no node is left for it (every node is turned down whatever room it has)"
        return Finding(Cause.NO_CAPACITY, line + also)
    need = sum(p.requests.gpus for p in waiting)
    largest = max(p.requests.gpus for p in waiting)
    biggest = max(snapshot.nodes[n].gpu_total for n in nodes)
    if largest > biggest:
        line = (
            f"{name} cannot run on the nodes it may use: a pod needs {largest} GPUs on one node "
            f"and the largest of {len(nodes)} such nodes has {biggest}"
        )
        return Finding(Cause.TOO_LARGE, line + also)
    rooms = Statement(snapshot, promises).rooms(nodes).values()
    free, most = sum(r.count for r in rooms), max((r.count for r in rooms), default=0)
    what_if = room_once_finished(
        key, waiting, nodes, snapshot, promises, topologies, free=free, locality_keys=settings.locality_keys
    )
    where = f"{len(nodes)} node{'' if len(nodes) == 1 else 's'} it may use"
    if not need:
        cause, line = Cause.NO_CAPACITY, f"{name} waits for CPU or memory: no node it may use has room for it"
    elif free >= need:
        cause = Cause.FRAGMENTED
        line = (
            f"{name} waits for room in one place: it needs {_needs(waiting)}; {free} GPUs are free on the "
            f"{where}, but at most {most} on one node"
        )
    else:
        cause = Cause.NO_CAPACITY
        line = f"{name} waits for GPUs: it needs {_needs(waiting)}; {free} are free on the {where}"
    if what_if is None:
        return Finding(cause, f"{line}; no running group finishing (up to 3) makes room for it{also}")
    *others, last = what_if.finished
    finished = f"{', '.join(others)} and {last}" if others else last
    verb = "finishes" if len(what_if.finished) == 1 else "finish"
    return Finding(
        cause, f"{line}; it fits once {finished} {verb} ({what_if.freed_gpus} GPUs){also}", what_if
    )
