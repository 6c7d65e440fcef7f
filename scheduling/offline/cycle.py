"""One kube-scheduler scheduling cycle of a phalanx pod, as the extender answers it: filter, score, bind.

In the product kube-scheduler drives the cycle and the extender answers each verb through
``scheduling.session``. A simulator has no kube-scheduler, so the two pieces of kube-scheduler's own
behaviour that decide where a pod lands are written down here, next to the verbs they drive, and every
driver that simulates the cycle uses the same ones:

- **Order** (``active_queue_order``): kube-scheduler's default ``PrioritySort`` pops the pod of the
  highest ``spec.priority`` first, then the one queued earliest; we take the creation time for the
  queueing time and the pod's key as the last tie-break (kube-scheduler has none we can reproduce).
- **Choice** (``pick_node``): the feasible node with the highest score. kube-scheduler breaks ties at
  random (reservoir sampling in ``selectHost``); we take the lowest name, so a run is deterministic.
  Only the extender's scores count: a simulated cluster has no other score plugins worth modelling
  (every node is alike to them).

``schedule_pod`` is one cycle: ``filter_pod``, then ``prioritize_pod`` on the feasible nodes, then
``choose_for_bind`` on the chosen node. The GPUs chosen at bind are promised in the book it returns,
which is how the next cycle, on the same snapshot, sees them taken (as the extender does until its
cache shows the pod bound).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from scheduling.admission.queue_hold import AdmittedBook, RoomMemo
from scheduling.cluster.promises import PromiseBook
from scheduling.cluster.snapshot import ClusterSnapshot
from scheduling.gpu.choice import NoGpusError
from scheduling.model import Pod
from scheduling.nodes.ranking import ScoreMemo
from scheduling.queues.view import QueueView
from scheduling.session import FilterInput, SessionSettings, choose_for_bind, filter_pod, prioritize_pod
from scheduling.topology import TopologyCache


def active_queue_order(pods: Iterable[Pod]) -> list[Pod]:
    """Pods in the order kube-scheduler's ``PrioritySort`` pops them: priority, then age, then key.

    >>> from scheduling.model import Resources
    >>> a = Pod("1", "ml", "a", Resources(), priority=0, created="2024-01-01T00:00:02Z")
    >>> b = Pod("2", "ml", "b", Resources(), priority=0, created="2024-01-01T00:00:01Z")
    >>> c = Pod("3", "ml", "c", Resources(), priority=5, created="2024-01-01T00:00:09Z")
    >>> [p.name for p in active_queue_order([a, b, c])]
    ['c', 'b', 'a']
    """
    return sorted(pods, key=lambda p: (-p.priority, p.created, p.key))


def pick_node(scores: Sequence[tuple[str, int]]) -> str | None:
    """The node kube-scheduler binds to: the highest score, the lowest name among equals.

    >>> pick_node([("n2", 7), ("n1", 7), ("n3", 3)])
    'n1'
    >>> pick_node([]) is None
    True
    """
    if not scores:
        return None
    return min(scores, key=lambda s: (-s[1], s[0]))[0]


@dataclass(frozen=True, slots=True)
class CycleResult:
    """What one cycle did.

    Attributes:
        node: the node the pod was bound to, or ``None`` when no node took it.
        gpus: the GPU indices chosen at bind.
        promises: the book to keep (the bind's promise added, a gang's reservation kept).
        admitted: the admitted-groups book to keep (the pod's group counted against its queue).
        reason: why no node took it (the first rejection's message), when none did.
    """

    node: str | None
    gpus: tuple[int, ...]
    promises: PromiseBook
    admitted: AdmittedBook
    reason: str = ""


@dataclass(frozen=True, slots=True)
class CycleContext:
    """What every cycle of one round reads besides the pod and the books."""

    snapshot: ClusterSnapshot
    view: QueueView | None
    nodes: tuple[str, ...]
    now: float
    settings: SessionSettings
    topologies: TopologyCache
    memo: ScoreMemo
    room: RoomMemo


def schedule_pod(pod: Pod, promises: PromiseBook, admitted: AdmittedBook, ctx: CycleContext) -> CycleResult:
    """One cycle for ``pod`` on every node of ``ctx`` (see the module docstring)."""
    asked = FilterInput(pod, ctx.nodes, ctx.snapshot, promises, ctx.view, admitted, ctx.now)
    outcome = filter_pod(asked, topologies=ctx.topologies, settings=ctx.settings, room=ctx.room)
    book = outcome.promises
    if outcome.admitted is not None:
        admitted = admitted.with_group(*outcome.admitted)
    if not outcome.feasible:
        first = next(iter(sorted(outcome.rejected.items())), None)
        reason = first[1].message if first is not None else "no node offered"
        return CycleResult(None, (), book, admitted, reason)
    scores = prioritize_pod(pod, outcome.feasible, ctx.snapshot, book, ctx.topologies, ctx.memo)
    node = pick_node(scores)
    if node is None:  # pragma: no cover - feasible is not empty, so neither are the scores
        return CycleResult(None, (), book, admitted, "no score")
    try:
        book, promise, _ = choose_for_bind(
            pod, node, ctx.snapshot, book, now=ctx.now, settings=ctx.settings, topologies=ctx.topologies
        )
    except NoGpusError as exc:
        return CycleResult(None, (), book, admitted, str(exc))
    return CycleResult(node, promise.gpus, book, admitted)
