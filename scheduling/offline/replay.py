"""Save a filter decision with everything it read, and re-run it from the file (KAI's snapshot tool).

A user attaches the file to a bug report; anyone re-runs the very decision offline, through the same
core, with no cluster: ``replay_filter(data, TopologyCache())``. The file holds the pod and the
candidate nodes, the snapshot (nodes with their topology documents, pods, PodGroups, Queues), the
promise book, the queue view's own inputs (it may lag the snapshot by up to a second, so it is saved
as built, from its own snapshot), the admitted groups, the clock reading, the settings, and the answer
the extender gave, so a replay can be checked against it.

JSON through msgspec: the core's records are frozen dataclasses and encode as they are, except a
node's prepared topology, which is saved as its document and prepared again on load (with the default
bandwidth model, as the extender prepares it).

A cluster snapshot (``phalanx snapshot save``, ``scheduling.offline.snapshot_file``) is the same format
without the decision: the same version number and the same records for the cluster, told apart by its
``"kind": "snapshot"`` (a decision file has no ``kind``: it came first). :func:`saved_kind` reads which.
A node's ``pin_taint`` and ``taints`` were added to format 1 with defaults, so older files read as before.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import msgspec
from immutables import Map

from scheduling.admission.queue_hold import AdmittedBook, AdmittedGroup, TriedBook
from scheduling.cluster.promises import Promise, PromiseBook
from scheduling.cluster.snapshot import ClusterSnapshot
from scheduling.cluster.state import state_of
from scheduling.model import Node, Pod, PodGroup, Resources, Taint
from scheduling.queues import Queue
from scheduling.queues.view import view_of
from scheduling.session import FilterInput, FilterOutcome, SessionSettings, filter_pod
from scheduling.topology import TopologyCache, TopologyError, from_json

FORMAT = 1
"""The file format's version; a file of another version is refused with a reason."""

DECISION = "decision"
"""The kind of a file holding one filter decision (``save_filter``)."""

SNAPSHOT = "snapshot"
"""The kind of a file holding a cluster alone (``scheduling.offline.snapshot_file``)."""


class ReplayError(ValueError):
    """The file cannot be replayed: not a saved decision, or another format version."""


@dataclass(frozen=True)
class SavedNode:
    """A node, its prepared topology replaced by the document it was prepared from."""

    name: str
    allocatable: Resources
    labels: dict[str, str] = field(default_factory=dict)
    unschedulable: bool = False
    ready: bool = True
    topology: str | None = None
    topology_problem: str | None = None
    pin_taint: bool = False
    taints: list[Taint] = field(default_factory=list)
    gpu_problem: str | None = None
    unhealthy_gpus: list[int] = field(default_factory=list)


@dataclass(frozen=True)
class SavedCluster:
    """Everything a snapshot holds that is not derived from the rest."""

    nodes: list[SavedNode]
    pods: list[Pod]
    groups: list[PodGroup]
    queues: list[Queue]


@dataclass(frozen=True)
class SavedAnswer:
    """What the extender answered: feasible nodes, each rejected node's message, the group verdict."""

    feasible: list[str]
    rejected: dict[str, str]
    verdict: str | None


@dataclass(frozen=True)
class SavedFilter:
    """One filter decision, its inputs and its answer."""

    format: int
    pod: Pod
    candidates: list[str]
    cluster: SavedCluster
    promises: list[Promise]
    admitted: dict[str, AdmittedGroup]
    now: float
    settings: SessionSettings
    answer: SavedAnswer
    view_cluster: SavedCluster | None = None
    view_promises: list[Promise] = field(default_factory=list)
    view_queues: list[Queue] = field(default_factory=list)
    tried: dict[str, float] | None = None
    wall: float = 0.0


def answer_of(outcome: FilterOutcome) -> SavedAnswer:
    """The part of an outcome a user sees, in the file's terms."""
    return SavedAnswer(
        list(outcome.feasible),
        {node: rejection.message for node, rejection in sorted(outcome.rejected.items())},
        outcome.verdict.message if outcome.verdict is not None else None,
    )


def save_filter(asked: FilterInput, outcome: FilterOutcome, settings: SessionSettings) -> bytes:
    """The decision ``outcome`` took on ``asked`` under ``settings``, as JSON."""
    view = asked.view
    view_cluster, view_promises, view_queues = None, [], []
    if view is not None and view.source is not None:
        source, promises = view.source
        view_cluster = None if source is asked.snapshot else saved_cluster(source)
        view_promises = _promises(promises)
        view_queues = sorted(view.tree.queues.values(), key=lambda q: q.name)
    saved = SavedFilter(
        format=FORMAT,
        pod=asked.pod,
        candidates=list(asked.candidates),
        cluster=saved_cluster(asked.snapshot),
        promises=_promises(asked.promises),
        admitted=dict(sorted(asked.admitted.by_group.items())),
        now=asked.now,
        settings=settings,
        answer=answer_of(outcome),
        view_cluster=view_cluster,
        view_promises=view_promises,
        view_queues=view_queues,
        tried=dict(sorted(asked.tried.at.items())) if asked.tried is not None else None,
        wall=asked.wall,
    )
    return msgspec.json.encode(saved, enc_hook=encode_hook)


def load_filter(data: bytes, topologies: TopologyCache) -> tuple[FilterInput, SessionSettings, SavedAnswer]:
    """Read a saved decision back: its inputs, its settings and the answer given then.

    Raises:
        ReplayError: the data is not a saved decision of this format.
    """
    if saved_kind(data) != DECISION:
        msg = "the file is a cluster snapshot, not a saved decision"
        raise ReplayError(msg)
    try:
        saved = msgspec.json.decode(data, type=SavedFilter)
    except (msgspec.ValidationError, TopologyError) as exc:
        msg = f"saved decision is malformed: {exc}"
        raise ReplayError(msg) from exc
    snapshot = restore_cluster(saved.cluster, topologies)
    view = None
    if saved.view_queues:
        source = snapshot if saved.view_cluster is None else restore_cluster(saved.view_cluster, topologies)
        view = view_of(source, PromiseBook.of(_by_uid(saved.view_promises)))
    asked = FilterInput(
        saved.pod,
        tuple(saved.candidates),
        snapshot,
        PromiseBook.of(_by_uid(saved.promises)),
        view,
        AdmittedBook(MappingProxyType(dict(saved.admitted))),
        saved.now,
        TriedBook(Map(saved.tried)) if saved.tried is not None else None,
        saved.wall,
    )
    return asked, saved.settings, saved.answer


def replay_filter(data: bytes, topologies: TopologyCache) -> tuple[SavedAnswer, SavedAnswer]:
    """Re-run a saved decision; return (the answer now, the answer then): equal for a faithful replay."""
    asked, settings, then = load_filter(data, topologies)
    outcome = filter_pod(asked, topologies=topologies, settings=settings)
    return answer_of(outcome), then


def saved_kind(data: bytes) -> str:
    """Which kind of phalanx file ``data`` is: :data:`DECISION` or :data:`SNAPSHOT`.

    A decision file carries no ``kind`` (it came first); a snapshot says ``"kind": "snapshot"``.

    Raises:
        ReplayError: ``data`` is not JSON, not a phalanx file, or of another format version.
    """
    try:
        head = msgspec.json.decode(data)
    except msgspec.DecodeError as exc:
        msg = f"not a saved phalanx decision or snapshot: {exc}"
        raise ReplayError(msg) from exc
    if not isinstance(head, dict) or head.get("format") != FORMAT:
        got = head.get("format") if isinstance(head, dict) else type(head).__name__
        msg = f"saved file has format {got!r}; this phalanx reads format {FORMAT}"
        raise ReplayError(msg)
    kind = head.get("kind", DECISION)
    if kind not in (DECISION, SNAPSHOT):
        msg = f"saved file is of kind {kind!r}; this phalanx reads {DECISION!r} and {SNAPSHOT!r}"
        raise ReplayError(msg)
    return str(kind)


def saved_cluster(snapshot: ClusterSnapshot) -> SavedCluster:
    """The part of ``snapshot`` a file keeps: every node (topology as its document), pod, PodGroup, Queue."""
    nodes = [
        SavedNode(
            n.name,
            n.allocatable,
            dict(n.labels),
            n.unschedulable,
            n.ready,
            n.topology.document.to_json() if n.topology is not None else None,
            n.topology_problem,
            n.pin_taint,
            list(n.taints),
            n.gpu_problem,
            sorted(n.unhealthy_gpus),
        )
        for _, n in sorted(snapshot.nodes.items())
    ]
    return SavedCluster(nodes, snapshot.all_pods(), snapshot.podgroups(), snapshot.queue_list())


def restore_cluster(saved: SavedCluster, topologies: TopologyCache) -> ClusterSnapshot:
    """The snapshot ``saved`` was made from, topologies prepared again through ``topologies``.

    Raises:
        TopologyError: a node's saved topology document is unreadable.
    """
    nodes = [
        Node(
            n.name,
            n.allocatable,
            MappingProxyType(n.labels),
            n.unschedulable,
            n.ready,
            topologies.topology(from_json(n.topology)) if n.topology is not None else None,
            n.topology_problem,
            n.pin_taint,
            tuple(n.taints),
            unhealthy_gpus=frozenset(n.unhealthy_gpus),
            gpu_problem=n.gpu_problem,
        )
        for n in saved.nodes
    ]
    return state_of(nodes, saved.pods, saved.groups, saved.queues).snapshot()


def _promises(book: PromiseBook) -> list[Promise]:
    return [book.by_uid[uid] for uid in sorted(book.by_uid)]


def _by_uid(promises: list[Promise]) -> dict[str, Promise]:
    return {p.pod_uid: p for p in promises}


def encode_hook(value: Any) -> Any:
    """The hook for what msgspec cannot encode itself: read-only and persistent maps, as dicts."""
    if isinstance(value, (MappingProxyType, Map)):
        return dict(value)
    msg = f"cannot save a {type(value).__name__}"
    raise NotImplementedError(msg)
