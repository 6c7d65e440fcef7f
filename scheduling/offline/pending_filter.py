"""Ask the core's filter offline for pods still waiting in a snapshot: which nodes pass, and why not the rest.

This is the extender's filter decision (``scheduling.session.filter_pod``), asked the way kube-scheduler
asks it, with what a snapshot holds and nothing else:

- *Candidates.* kube-scheduler sends the extender only the nodes its own filters passed, and phalanx's
  sentence for a gang ("8 free on 1 node") counts only those. :func:`in_tree_filter` approximates the
  in-tree filters that matter for GPU pods, in kube-scheduler's order and words: ``NodeUnschedulable``
  ("node(s) were unschedulable"), ``TaintToleration`` for the elastic pool's ``phalanx.io/hostname``
  taint, and ``NodeResourcesFit`` ("Insufficient nvidia.com/gpu": requests against allocatable minus
  what bound pods request). It does not know node selectors, affinity, other taints or pod-count limits,
  which the snapshot does not keep. When no node passes, kube-scheduler does not ask phalanx at all, and
  neither does the replay. ``every_node`` skips the approximation and offers phalanx every node.
- *State.* Finished pods are left out, as the extender's cache leaves them out; there are no promises
  and no recently admitted groups (they live only in the extender's memory); the queue view is built
  from the snapshot itself.
- *Independence.* Each pod is asked as if it were the next one kube-scheduler sends: a gang member's
  reservation is not carried over to the next pod, so every member of a waiting gang gets the gang's
  own answer.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from scheduling.admission.queue_hold import AdmittedBook
from scheduling.cluster.promises import PromiseBook
from scheduling.cluster.snapshot import ClusterSnapshot
from scheduling.cluster.state import state_of
from scheduling.model import GPU_RESOURCE, SCHEDULER_NAME, TERMINAL_PHASES, Pod
from scheduling.queues.view import view_of
from scheduling.session import FilterInput, SessionSettings, filter_pod
from scheduling.topology import TopologyCache

KUBE_SCHEDULER = "kube-scheduler"
"""The source of a reason given by kube-scheduler's own filters."""

PHALANX = "phalanx"
"""The source of a reason given by phalanx's filter."""


@dataclass(frozen=True, slots=True)
class ReasonGroup:
    """The nodes turned down for one reason.

    Attributes:
        source: :data:`KUBE_SCHEDULER` or :data:`PHALANX`.
        message: the sentence, as the pod's ``FailedScheduling`` event would count it.
        nodes: the nodes, sorted.
    """

    source: str
    message: str
    nodes: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class PodReplay:
    """The filter decision for one waiting pod.

    Attributes:
        pod: ``namespace/name``.
        group: its PodGroup's ``namespace/name``, if it has one.
        asked_phalanx: whether some node passed kube-scheduler's filters, so that phalanx was asked.
        feasible: the nodes that pass, sorted.
        reasons: every other node grouped by reason, kube-scheduler's first, then by message.
        verdict: phalanx's sentence about the pod's group (held by its queue, gang waiting or
            reserved), ``None`` for a pod on its own that its queue let through.
        summary: when no node passes, the sentence kube-scheduler's ``FailedScheduling`` event opens
            with (:func:`unschedulable_message`); ``None`` when some node passes.
    """

    pod: str
    group: str | None
    asked_phalanx: bool
    feasible: tuple[str, ...]
    reasons: tuple[ReasonGroup, ...]
    verdict: str | None
    summary: str | None = None


def waiting_pods(snapshot: ClusterSnapshot) -> list[Pod]:
    """The pods phalanx would be asked about: its own, unbound, pending and not being deleted, by key."""
    return [
        p
        for p in snapshot.all_pods()
        if p.scheduler_name == SCHEDULER_NAME
        and p.node_name is None
        and p.phase == "Pending"
        and not p.terminating
    ]


def in_tree_filter(
    pod: Pod, snapshot: ClusterSnapshot
) -> tuple[tuple[str, ...], Mapping[str, tuple[str, ...]]]:
    """The nodes kube-scheduler's own filters would pass for ``pod`` (sorted), and the reasons of the rest.

    See the module docstring for what it checks and what it cannot know.

    >>> from scheduling.model import Node, Resources
    >>> nodes = [Node("a", Resources(gpus=8)), Node("b", Resources(gpus=8), unschedulable=True)]
    >>> held = Pod("u1", "ml", "x", Resources(gpus=6), node_name="a", phase="Running")
    >>> in_tree_filter(Pod("u2", "ml", "y", Resources(gpus=4)), state_of(nodes, [held]).snapshot())
    ((), {'a': ('Insufficient nvidia.com/gpu',), 'b': ('node(s) were unschedulable',)})
    """
    passing: list[str] = []
    rejected: dict[str, tuple[str, ...]] = {}
    need = pod.requests
    for name in sorted(snapshot.nodes):
        node = snapshot.nodes[name]
        if node.unschedulable:
            rejected[name] = ("node(s) were unschedulable",)
            continue
        if node.pin_taint and not (pod.tolerates_pool or name in pod.pinned):
            rejected[name] = (f"node(s) had untolerated taint {{phalanx.io/hostname: {name}}}",)
            continue
        used, alloc = snapshot.usage_of(name).requested, node.allocatable
        short = []
        if need.milli_cpu > 0 and need.milli_cpu > alloc.milli_cpu - used.milli_cpu:
            short.append("Insufficient cpu")
        if need.memory > 0 and need.memory > alloc.memory - used.memory:
            short.append("Insufficient memory")
        if need.gpus > 0 and need.gpus > alloc.gpus - used.gpus:
            short.append(f"Insufficient {GPU_RESOURCE}")
        if short:
            rejected[name] = tuple(short)
        else:
            passing.append(name)
    return tuple(passing), rejected


def live_snapshot(snapshot: ClusterSnapshot) -> ClusterSnapshot:
    """``snapshot`` without finished pods, as the extender's cache holds the cluster."""
    live = [p for p in snapshot.all_pods() if p.phase not in TERMINAL_PHASES]
    if len(live) == len(snapshot.pods):
        return snapshot
    return state_of(snapshot.nodes.values(), live, snapshot.podgroups(), snapshot.queue_list()).snapshot()


def group_reasons(source: str, rejected: Mapping[str, Iterable[str]]) -> tuple[ReasonGroup, ...]:
    """Nodes grouped by each of their reasons, by message (a node with two reasons is in two groups).

    >>> group_reasons("phalanx", {"b": ["full"], "a": ["full"], "c": ["cordoned"]})
    (ReasonGroup(source='phalanx', message='cordoned', nodes=('c',)), \
ReasonGroup(source='phalanx', message='full', nodes=('a', 'b')))
    """
    by_message: dict[str, list[str]] = {}
    for node, messages in rejected.items():
        for message in messages:
            by_message.setdefault(message, []).append(node)
    return tuple(ReasonGroup(source, m, tuple(sorted(n))) for m, n in sorted(by_message.items()))


def unschedulable_message(node_count: int, reasons: Iterable[ReasonGroup]) -> str:
    """kube-scheduler's sentence for a pod no node passes: each reason with its node count, sorted as text.

    It is how kube-scheduler's ``FitError`` words the histogram (``sort.Strings`` over "count reason"),
    extenders' messages counted like its own; its event goes on with what preemption found.

    >>> unschedulable_message(3, [ReasonGroup(PHALANX, "gang ml/g: ...", ("n3",)),
    ...                          ReasonGroup(KUBE_SCHEDULER, "Insufficient nvidia.com/gpu", ("n1", "n2"))])
    '0/3 nodes are available: 1 gang ml/g: ..., 2 Insufficient nvidia.com/gpu.'
    """
    counted = sorted(f"{len(r.nodes)} {r.message}" for r in reasons)
    return f"0/{node_count} nodes are available: {', '.join(counted)}."


def replay_pending(
    snapshot: ClusterSnapshot,
    *,
    now: float,
    settings: SessionSettings,
    topologies: TopologyCache,
    pods: Sequence[str] | None = None,
    every_node: bool = False,
) -> tuple[PodReplay, ...]:
    """Decide filter for the waiting pods of ``snapshot`` (or the ``namespace/name`` keys in ``pods``).

    Raises:
        ValueError: a pod named in ``pods`` is not in the snapshot, or is not waiting for phalanx.
    """
    live = live_snapshot(snapshot)
    waiting = {p.key: p for p in waiting_pods(live)}
    keys = sorted(waiting) if pods is None else sorted(set(pods))
    for key in keys:
        if key not in waiting:
            found = snapshot.pod(*key.split("/", 1)) if "/" in key else None
            why = "is not in the snapshot" if found is None else _not_waiting(found)
            msg = f"pod {key} {why}"
            raise ValueError(msg)
    view = view_of(live, PromiseBook())
    replays = []
    for key in keys:
        pod = waiting[key]
        kube: Mapping[str, tuple[str, ...]] = {}
        if every_node:
            candidates = tuple(sorted(live.nodes))
        else:
            candidates, kube = in_tree_filter(pod, live)
        own: tuple[ReasonGroup, ...] = ()
        feasible: tuple[str, ...] = ()
        verdict = None
        if candidates:
            asked = FilterInput(pod, candidates, live, PromiseBook(), view, AdmittedBook(), now)
            outcome = filter_pod(asked, topologies=topologies, settings=settings)
            feasible = tuple(sorted(outcome.feasible))
            own = group_reasons(PHALANX, {n: (r.message,) for n, r in outcome.rejected.items()})
            verdict = outcome.verdict.message if outcome.verdict is not None else None
        reasons = group_reasons(KUBE_SCHEDULER, kube) + own
        summary = None if feasible else unschedulable_message(len(live.nodes), reasons)
        replays.append(PodReplay(key, pod.group_key, bool(candidates), feasible, reasons, verdict, summary))
    return tuple(replays)


def _not_waiting(pod: Pod) -> str:
    if pod.scheduler_name != SCHEDULER_NAME:
        return f"is scheduled by {pod.scheduler_name}, not phalanx"
    if pod.node_name is not None:
        return f"is already bound to node {pod.node_name}"
    if pod.terminating:
        return "is being deleted"
    return f"is not pending (phase {pod.phase})"
