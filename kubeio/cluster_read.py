"""Read the whole cluster once, as the core sees it, for the command-line tool (no watches).

The extender and the placement manager keep the cluster in a cache fed by watches
(``kubeio.cluster_cache``); a one-shot command (``phalanx queues``, ``phalanx snapshot save``,
``phalanx why``) needs the same facts once. :func:`read_cluster` LISTs nodes, pods, PodGroups and
Queues, converts them with the cache's own converters (``kubeio.convert``, ``kubeio.queue_objects``) into the
core's ``ClusterSnapshot``, and names every object it could not read instead of failing: one malformed
object must not hide the rest of the cluster from the person asking about it.

What a one-shot read cannot see: the extender's promises (GPUs chosen at bind whose Binding is in flight,
and gang reservations), which live only in the extender's memory.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, TypeVar

from kubeio.cluster_cache import PODGROUPS_PATH
from kubeio.convert import ConvertError, node_from_api, pod_from_api, podgroup_from_api
from kubeio.errors import KubeError, NotFoundError
from kubeio.http import JsonObject, JsonRequester
from kubeio.native_podgroups import NATIVE_PODGROUPS_PATH, native_podgroup_from_api
from kubeio.queue_objects import QUEUES_PATH, queue_from_api
from kubeio.reflector import Collection, list_collection
from scheduling.cluster.snapshot import ClusterSnapshot
from scheduling.cluster.state import state_of
from scheduling.model import Node
from scheduling.queues import Queue
from scheduling.topology import TopologyCache

T = TypeVar("T")

NODES_PATH = "/api/v1/nodes"
PODS_PATH = "/api/v1/pods"


@dataclass(frozen=True, slots=True)
class Skipped:
    """An object left out because phalanx cannot read it.

    Attributes:
        kind: ``Node``, ``Pod``, ``PodGroup`` or ``Queue``.
        name: ``namespace/name`` for namespaced kinds, else the name (``?`` when it has none).
        problem: what is wrong with it, naming the field.
    """

    kind: str
    name: str
    problem: str

    def __str__(self) -> str:
        return f"{self.kind} {self.name} skipped: {self.problem}"


@dataclass(frozen=True, slots=True)
class ClusterRead:
    """The cluster as one LIST of each collection saw it.

    Attributes:
        snapshot: nodes, every pod (finished ones too: gangs count them), PodGroups and Queues, with the
            per-node GPU accounting the extender keeps; no promises.
        queues: every Queue object as written, sorted by name (not yet validated as a tree).
        skipped: objects left out, sorted by kind and name.
        warnings: other things the reader should know, sorted: a node whose topology annotation is
            unreadable (kept, but phalanx places no GPU pod there), a node that advertises more GPUs
            than phalanx models (kept, its GPUs not counted), a CRD that is not installed.
    """

    snapshot: ClusterSnapshot
    queues: tuple[Queue, ...]
    skipped: tuple[Skipped, ...] = ()
    warnings: tuple[str, ...] = ()

    def problems(self) -> tuple[str, ...]:
        """Every skipped object and warning as one sentence each, for stderr."""
        return tuple(str(s) for s in self.skipped) + self.warnings


def read_cluster(http: JsonRequester, *, topologies: TopologyCache | None = None) -> ClusterRead:
    """LIST nodes, pods, PodGroups and Queues once and build the core's snapshot of them.

    Args:
        http: the API server connection.
        topologies: prepared GPU topologies to share (a new cache if ``None``).

    Raises:
        KubeError: a list failed (a PodGroup or Queue CRD that is not installed is not a failure: it
            reads as empty, with a warning).
    """
    cache = topologies or TopologyCache()
    skipped: list[Skipped] = []
    warnings: list[str] = []

    def node(raw: object) -> Node:
        return node_from_api(raw, cache)

    nodes = _convert_all("Node", _list(http, NODES_PATH, warnings, "Node"), node, skipped)
    pods = _convert_all("Pod", _list(http, PODS_PATH, warnings, "Pod"), pod_from_api, skipped)
    groups = _convert_all(
        "PodGroup", _list(http, PODGROUPS_PATH, warnings, "PodGroup"), podgroup_from_api, skipped
    )
    # Kubernetes' own PodGroups: an alpha API most clusters do not serve, so its absence is no warning.
    native = _convert_all(
        "PodGroup.scheduling.k8s.io",
        _native(http, warnings),
        native_podgroup_from_api,
        skipped,
    )
    taken = {g.key for g in groups}
    groups += [g for g in native if g.key not in taken]  # a name both kinds use: the plugins one (cache)
    queues = _convert_all("Queue", _list(http, QUEUES_PATH, warnings, "Queue"), queue_from_api, skipped)
    warnings.extend(f"node {n.name}: {n.topology_problem}" for n in nodes if n.topology_problem)
    warnings.extend(n.gpu_problem for n in nodes if n.gpu_problem)
    snapshot = state_of(nodes, pods, groups, queues).snapshot()
    return ClusterRead(
        snapshot,
        tuple(sorted(queues, key=lambda q: q.name)),
        tuple(sorted(skipped, key=lambda s: (s.kind, s.name))),
        tuple(sorted(warnings)),
    )


def _native(http: JsonRequester, warnings: list[str]) -> list[JsonObject]:
    """Kubernetes' own PodGroups: none where the alpha API is off (no warning); said when forbidden."""
    try:
        return _list(http, NATIVE_PODGROUPS_PATH, [], "PodGroup")
    except KubeError as exc:
        if exc.status != 403:
            raise
        warnings.append(f"PodGroup.scheduling.k8s.io objects cannot be listed ({exc.message}): left out")
        return []


def _list(http: JsonRequester, path: str, warnings: list[str], kind: str) -> list[JsonObject]:
    """The items of one collection; a custom resource whose CRD is missing reads as empty."""
    try:
        return list_collection(http, Collection(path))[0]
    except NotFoundError:
        if path in (NODES_PATH, PODS_PATH):
            raise
        warnings.append(f"{kind} objects cannot be listed ({path} not found): is the CRD installed?")
        return []


def _convert_all(
    kind: str, items: Iterable[JsonObject], convert: Callable[[object], T], skipped: list[Skipped]
) -> list[T]:
    converted: list[T] = []
    for raw in items:
        try:
            converted.append(convert(raw))
        except ConvertError as exc:
            skipped.append(Skipped(kind, object_name(raw), str(exc)))
        except Exception as exc:  # whatever one object holds, the rest of the cluster is still shown
            skipped.append(Skipped(kind, object_name(raw), f"{type(exc).__name__}: {exc}"[:1024]))
    return converted


def object_name(raw: object) -> str:
    """``namespace/name`` (or ``name`` for a cluster-scoped object) of raw API JSON, ``?`` if unreadable.

    >>> object_name({"metadata": {"namespace": "ml", "name": "w0"}}), object_name({"metadata": 3})
    ('ml/w0', '?')
    """
    meta: Any = raw.get("metadata") if isinstance(raw, dict) else None
    if not isinstance(meta, dict):
        return "?"
    name, namespace = meta.get("name"), meta.get("namespace")
    name = name if isinstance(name, str) and name else "?"
    return f"{namespace}/{name}" if isinstance(namespace, str) and namespace else name
