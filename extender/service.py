"""The extender's verbs as plain methods: read the cluster view, call the core, keep promises.

No Flask here, so every verb is unit-testable with an in-memory cluster. The only mutable state is the
promise book (GPUs chosen by ``bind`` whose binding the cache has not shown yet), swapped atomically as
an immutable value under one lock; ``filter`` and ``prioritize`` read it without locking.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Protocol

from extender.gangs import GangCoordinator
from extender.ledger import PromiseLedger
from extender.nudger import Nudger
from extender.queues import QueueKeeper
from kubeio.binding import BindRefusedError, BindStatus
from kubeio.convert import format_gpu_indices
from kubeio.errors import KubeError
from scheduling import reasons
from scheduling.gpu_choice import NoGpusError, choose_gpus
from scheduling.gpu_fit import FilterDecision, filter_nodes
from scheduling.model import GPUS_ANNOTATION, Pod
from scheduling.node_ranking import ScoreMemo, rank_nodes
from scheduling.promises import Promise, PromiseBook
from scheduling.snapshot import ClusterSnapshot
from scheduling.topology import TopologyCache

log = logging.getLogger(__name__)


class ClusterView(Protocol):
    """What the extender reads: ``kubeio.cluster_cache.ClusterCache`` or an in-memory fake."""

    def snapshot(self) -> ClusterSnapshot:
        """The current nodes and GPU usage."""

    def pod(self, namespace: str, name: str) -> Pod | None:
        """A live pod by name, if known."""


class Binder(Protocol):
    """What the extender writes: ``kubeio.binding.PodBinder`` or a fake."""

    def get_pod(self, namespace: str, name: str) -> Pod | None:
        """Read one pod from the API server."""

    def bind(
        self, namespace: str, name: str, uid: str, node: str, annotations: Mapping[str, str]
    ) -> BindStatus:
        """Create the Binding."""


class UnknownNodeError(ValueError):
    """A request names a node the extender has never seen; answered with HTTP 400."""


@dataclass(frozen=True, slots=True)
class BindOutcome:
    """How one bind call ended.

    Attributes:
        error: empty on success, else the message kube-scheduler puts in the pod's event.
        outcome: a stable name for metrics (``bound``, ``already_bound``, ``refused``, ...).
        gpus: the GPU indices the pod holds after a successful bind.
    """

    error: str
    outcome: str
    gpus: tuple[int, ...] = ()


class Extender:
    """filter, prioritize, bind and preempt over one cluster view."""

    def __init__(
        self,
        cluster: ClusterView,
        binder: Binder,
        *,
        clock: Callable[[], float],
        promise_ttl: float,
        topologies: TopologyCache | None = None,
        ledger: PromiseLedger | None = None,
        gangs: GangCoordinator | None = None,
        queues: QueueKeeper | None = None,
        nudger: Nudger | None = None,
    ) -> None:
        self._cluster = cluster
        self._binder = binder
        self._clock = clock
        self._promise_ttl = promise_ttl
        self._topologies = topologies or TopologyCache()
        self._score_memo: ScoreMemo = {}
        self.ledger = ledger or PromiseLedger()
        self.gangs = gangs
        self.queues = queues
        self.nudger = nudger
        """Queue rules; without them every pod is admitted as far as queues go."""
        """Gang handling; without it PodGroup labels are ignored and every pod is placed on its own."""

    @property
    def promises(self) -> PromiseBook:
        """The open promises (an immutable value)."""
        return self.ledger.book

    def filter(self, pod: Pod, node_names: tuple[str, ...]) -> FilterDecision:
        """Keep the candidate nodes with room for the pod's GPUs; give the others a reason.

        A member of a PodGroup is answered by the gang coordinator: its reserved node, or none. A pod
        left with no node is remembered, so it is woken when capacity frees up (``extender.nudger``).
        """
        decision = self._filter(pod, node_names)
        if not decision.feasible and self.nudger is not None:
            self.nudger.turned_down(pod)
        return decision

    def _filter(self, pod: Pod, node_names: tuple[str, ...]) -> FilterDecision:
        if pod.group_key is not None and self.gangs is not None:
            return self.gangs.filter(pod, node_names)
        held = self.queues.hold(pod) if self.queues is not None else None
        if held is not None:
            rejection = reasons.queue_hold(held)
            return FilterDecision((), MappingProxyType({n: rejection for n in dict.fromkeys(node_names)}))
        return filter_nodes(pod, node_names, self._cluster.snapshot(), self.ledger.book)

    def prioritize(self, pod: Pod, node_names: tuple[str, ...]) -> tuple[tuple[str, int], ...]:
        """Integer 0..10 scores: GPU connectivity first, packing second (``scheduling.node_ranking``)."""
        return rank_nodes(
            pod, node_names, self._cluster.snapshot(), self.ledger.book, self._topologies, self._score_memo
        )

    def preempt(
        self, pod: Pod, victims: Mapping[str, tuple[tuple[str, ...], int]]
    ) -> Mapping[str, tuple[tuple[str, ...], int]]:
        """Narrow kube-scheduler's proposed victims to those ``pod`` may preempt, keeping gangs whole.

        Priority preempts only within a queue, only preemptible pods past their queue's minimum runtime,
        and a gang's members on the node go together (``scheduling.queues.preempt_within_queue``).

        Raises:
            UnknownNodeError: a candidate node is not in the cluster view.
        """
        nodes = self._cluster.snapshot().nodes
        unknown = sorted(n for n in victims if n not in nodes)
        if unknown:
            msg = f"preempt names nodes phalanx does not know: {', '.join(unknown)}"
            raise UnknownNodeError(msg)
        if self.queues is None:
            return victims
        kept, why = self.queues.narrow(pod, victims)
        for reason in why:
            log.info("preempt for %s: %s", pod.key, reason)
        return kept

    def pod_changed(self, old: Pod | None, new: Pod | None) -> None:
        """Cache listener: a promise ends once the cache shows its pod bound, or gone."""
        if new is None and old is not None:
            self._release(old.uid)
        elif new is not None and new.node_name is not None:
            self._release(new.uid)

    def _release(self, uid: str) -> None:
        self.ledger.release(uid)

    def bind(self, namespace: str, name: str, uid: str, node: str) -> BindOutcome:
        """Choose GPU indices on ``node``, promise them, and create the Binding.

        Raises:
            UnknownNodeError: ``node`` is not in the cluster view.
        """
        snapshot = self._cluster.snapshot()
        if node not in snapshot.nodes:
            msg = f"bind names node {node!r}, which phalanx does not know"
            raise UnknownNodeError(msg)
        pod = self._cluster.pod(namespace, name) or self._binder.get_pod(namespace, name)
        if pod is None:
            return BindOutcome(f"pod {namespace}/{name} does not exist", "pod_gone")
        if pod.uid != uid:
            return BindOutcome(
                f"pod {namespace}/{name} was re-created (UID {pod.uid}, not {uid}); not binding",
                "uid_changed",
            )
        if pod.node_name is not None:
            if pod.node_name == node:
                return BindOutcome("", "already_bound", pod.gpu_indices or ())
            return BindOutcome(f"pod {pod.key} is already bound to node {pod.node_name}", "bound_elsewhere")
        if pod.group_key is not None and self.gangs is not None:
            result = self.gangs.bind(pod, node)
            return BindOutcome(result.error, result.outcome, result.gpus)
        try:
            promise = self._promise(pod, node)
        except NoGpusError as exc:
            return BindOutcome(f"node {node}: {exc} (taken since the pod was filtered)", "no_gpus")
        annotations = {GPUS_ANNOTATION: format_gpu_indices(promise.gpus)} if promise.gpus else {}
        try:
            status = self._binder.bind(namespace, name, uid, node, annotations)
        except BindRefusedError as exc:
            self._release(uid)
            return BindOutcome(f"binding {pod.key} to {node} was refused: {exc.message}", "refused")
        except KubeError as exc:
            self._release(uid)
            return BindOutcome(f"binding {pod.key} to {node} failed: {exc}", "api_error")
        if status is BindStatus.ALREADY_BOUND:
            self._release(uid)  # the earlier bind's annotation is the record; this promise is surplus
            return BindOutcome("", "already_bound")
        log.info("bound %s to %s with GPUs %s", pod.key, node, list(promise.gpus))
        return BindOutcome("", "bound", promise.gpus)

    def _promise(self, pod: Pod, node: str) -> Promise:
        def change(book: PromiseBook) -> tuple[PromiseBook, Promise]:
            book, lapsed = book.expire(self._clock())
            for old in lapsed:
                log.warning("promise of GPUs %s on %s to %s lapsed", old.gpus, old.node, old.pod_key)
            earlier = book.by_uid.get(pod.uid)
            if earlier is not None and earlier.node == node:
                return book, earlier
            book = book.release(pod.uid)
            snapshot = self._cluster.snapshot()
            info, free = snapshot.nodes.get(node), snapshot.free_on(node, book)
            if info is None or free is None:
                msg = "node left the cluster"
                raise NoGpusError(msg)
            gpus = choose_gpus(info, free, pod.requests.gpus, self._topologies)
            promise = Promise(pod.uid, pod.key, node, gpus, self._clock() + self._promise_ttl, pod.requests)
            return book.add(promise), promise

        return self.ledger.update(change)
