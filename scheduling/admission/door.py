"""The door: a pod on its own that the release pass would release now is let in ungated as it is created.

Gating every pod of scheduler ``phalanx`` costs each one a round trip before kube-scheduler sees it: the
cache's watch brings the gated pod to the placement manager, the release pass waits out its debounce,
decides, records an event and patches the gate away, and only that patch puts the pod in kube-scheduler's
queue. On a quiet cluster of 1,000 nodes that path was 90 of a pod's 112 ms from creation to bound
(22 ms with no gate), and under a steady 20 pods/s the passes, events and patches fell behind (a p50 of
500 ms). The gate exists for the pods that must wait; a pod that may start now gains nothing from it.

So the gate webhook asks ``decide_at_door`` first, and the answer is the release pass's own: the pod is
put, gated, where the fair order would put it among the groups that wait (``order_pending``), and
``release`` is run on that (the queue's rules, the in-flight budget, room now with the starvation
reserve, the gang planner on the nodes' real room). The pod goes in ungated only when that pass would
release it and nothing else: had it released another group too, the door letting the pod in first
could take that group's room before the next pass, so the pass decides instead. And only for pods
whose admission is phalanx's alone:

- on its own: a gang's members are released together, once all exist, by the pass;
- no other gate on it, and no other party owning its admission (Kueue's pods, an MPIJob's pods, which
  the pin webhook may still edit); and a name (a ``generateName`` pod has none yet, and the in-flight
  book is keyed by it);
- at most ``WALK_LIMIT`` groups waiting gated: a door is for a cluster that keeps up, and a backlog is
  the pass's (one walk per created pod over a thousand waiting groups would cost more than the gate).

Anything else, and any pod the walk keeps, is gated as before, and the reason is returned for the logs.
A pod let in is counted in flight from that moment (the caller keeps it beside the snapshot until its
cache sees it: ``scheduling.cluster.snapshot.with_pods``), so two pods created at once cannot both take
the last room.
"""

from __future__ import annotations

from dataclasses import replace

from scheduling.admission.flight import ReleasedBook
from scheduling.admission.outcome import GateSettings, Released
from scheduling.admission.release import release
from scheduling.cluster.ledger import PodLedger
from scheduling.cluster.promises import PromiseBook
from scheduling.cluster.snapshot import ClusterSnapshot, with_pods
from scheduling.cluster.statement import StatementChain
from scheduling.model import ADMISSION_GATE, SCHEDULER_NAME, Pod
from scheduling.queues import QueueError
from scheduling.queues.lines import pending_group, with_group
from scheduling.queues.ordering import order_lines
from scheduling.queues.view import QueueView
from scheduling.timestamps import timestamp
from scheduling.topology import TopologyCache

WALK_LIMIT = 16
"""Groups waiting gated, at most, for the door to walk them; with more, every pod takes the gate."""

OWNED_LABELS = ("kueue.x-k8s.io/", "training.kubeflow.org/")
"""Label prefixes of pods whose admission another party owns (Kueue) or that another webhook may still
edit as they are created (an MPIJob's pods get their pins there): they take the gate and the pass."""


def decide_at_door(
    snapshot: ClusterSnapshot,
    promises: PromiseBook,
    view: QueueView,
    book: ReleasedBook,
    pod: Pod,
    topologies: TopologyCache,
    *,
    now: float,
    settings: GateSettings,
    chain: StatementChain | None = None,
) -> Released | str:
    """Release ``pod`` as it is created, or say why it takes the gate (see the module docstring).

    Args:
        snapshot: the cluster now, with the pods let in earlier and not seen by the cache yet.
        promises: the open promises (the placement manager holds none).
        view: the queue view of the cache's snapshot.
        book: groups released and not bound yet, with when.
        pod: the pod being created, as the review brings it (no UID, no creation time yet).
        topologies: the topology cache the gang planner scores GPU sets with.
        now: the caller's clock, in the seconds of ``book``.
        settings: the release pass's limits.
        chain: the statements of the pass's and the door's earlier decisions, which this one starts from.
    """
    why = _not_at_door(pod)
    if why is not None:
        return why
    if snapshot.pod(pod.namespace, pod.name) is not None:
        return "a pod of that name exists (its creation fails, or waits for it to be gone)"
    ledger = chain.ledger if chain is not None else PodLedger()
    waiting = len(ledger.look(snapshot).gated)
    if waiting > WALK_LIMIT:
        return f"{waiting} groups wait gated: the release pass decides in the fair order"
    # Gated, and created now (the API server stamps it a moment later): the youngest of its queue. Its
    # UID is not the API's yet (a review brings the review's), so one is made from its name.
    gated = replace(
        pod, uid=f"door:{pod.key}", gates=(ADMISSION_GATE,), node_name=None, created=timestamp(now)
    )
    try:
        group = pending_group(gated, [gated], view.tree)
    except QueueError as exc:
        return f"its queue: {exc}"
    try:
        pending = order_lines(with_group(view.lines, group), view.states, view.capacity)
    except ValueError as exc:  # its queue has no state in this view (a queue newer than the view)
        return f"its queue: {exc}"
    decision = release(
        with_pods(snapshot, [gated]),
        promises,
        replace(view, pending=pending),
        book,
        topologies,
        now=now,
        settings=settings,
        chain=chain,
    )
    mine = next((r for r in decision.released if r.group == group.key), None)
    if mine is not None and len(decision.released) == 1:
        return mine
    if mine is not None:
        others = ", ".join(r.group for r in decision.released if r is not mine)
        return f"the pass would release {others} too: it decides"
    return next((k.reason for k in decision.kept if k.group == group.key), "kept by the pass")


def _not_at_door(pod: Pod) -> str | None:
    """Why ``pod`` is not decided at the door whatever the cluster's state, or ``None``."""
    if pod.scheduler_name != SCHEDULER_NAME:
        return f"not a pod of scheduler {SCHEDULER_NAME}"
    if pod.group_key is not None:
        return "a gang's member: the gang is released whole"
    if not pod.name:
        return "no name yet (generateName)"
    if pod.gates:
        return f"it carries scheduling gates ({', '.join(pod.gates)})"
    if pod.node_name:
        return "it names its node"
    owned = sorted({prefix for prefix in OWNED_LABELS for label in pod.labels if label.startswith(prefix)})
    if owned or pod.pinned or pod.tolerates_pool:
        return "its admission is another party's (Kueue, an MPIJob)"
    return None
