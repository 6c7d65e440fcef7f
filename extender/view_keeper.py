"""Queue rules in the extender: hold a group its queue may not start, narrow preemption victims.

Building the queues' view walks every pod, so it is refreshed in a background thread (at most every
``interval`` seconds, and only when the cluster changed); ``filter`` reads the latest view, which is at
most that old. Every hold names the queue and the rule ("queue team-a: over its GPU limit ...").
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Protocol

from extender.ledger import PromiseLedger
from scheduling.model import Node, Pod, Resources
from scheduling.promises import PromiseBook
from scheduling.queue_view import QueueView, build_queue_view, group_key, pending_group
from scheduling.queues import (
    PREEMPTIBLE_LABEL,
    QUEUE_LABEL,
    GangMember,
    PendingGroup,
    Preemptor,
    Queue,
    QueueError,
    QueueTree,
    VictimPod,
    admit,
    is_preemptible,
    preempt_within_queue,
)
from scheduling.queues.resources import plus
from scheduling.snapshot import ClusterSnapshot

log = logging.getLogger(__name__)

AHEAD_CHECKED = 64
"""At most this many groups ahead are checked against the cache (the first ones matter: they go next)."""

ADMITTED_TTL = 5.0
"""Seconds an admitted group counts against its queue while the view does not show it yet."""


class QueueSource(Protocol):
    """What the queue view is built from (``kubeio.cluster_cache.ClusterCache``)."""

    @property
    def version(self) -> int:
        """Changes whenever nodes, pods or queues change."""

    def snapshot(self) -> ClusterSnapshot:
        """Nodes and usage."""

    def pods(self) -> list[Pod]:
        """Every live pod."""

    def queues(self) -> list[Queue]:
        """Every Queue object."""

    def members(self, key: str) -> list[Pod]:
        """Live pods of a PodGroup."""

    def pod_by_uid(self, uid: str) -> Pod | None:
        """A live pod by UID."""

    def pod(self, namespace: str, name: str) -> Pod | None:
        """A live pod by name."""


class QueueKeeper:
    """Keeps the queue view fresh and applies its rules."""

    def __init__(self, source: QueueSource, ledger: PromiseLedger, *, clock: Callable[[], float]) -> None:
        self._source = source
        self._ledger = ledger
        self._clock = clock
        self._view: QueueView | None = None
        self._built_at = -1
        self._lock = threading.Lock()
        self._admitted: dict[str, tuple[str, Resources, frozenset[str], float]] = {}
        """Groups admitted since the view was built: key -> (queue, requests, member UIDs, expiry). The
        view lags by up to a refresh interval and kube-scheduler binds a pod ~100 ms after our filter,
        so these count against their queue until the view shows them, or a queue limit could be passed."""
        self._admitted_lock = threading.Lock()
        self._free_cache: tuple[ClusterSnapshot, PromiseBook, Resources] | None = None

    @property
    def view(self) -> QueueView | None:
        """The latest view, or ``None`` before the first build."""
        return self._view

    def refresh(self) -> QueueView:
        """Build the view now."""
        with self._lock:
            version = self._source.version
            previous: QueueTree | None = self._view.tree if self._view is not None else None
            nodes: Sequence[Node] = list(self._source.snapshot().nodes.values())
            view = build_queue_view(
                self._source.queues(), previous, nodes, self._source.pods(), self._ledger.book
            )
            if view.problems and (self._view is None or self._view.problems != view.problems):
                log.warning("queues are invalid, keeping the last valid set: %s", "; ".join(view.problems))
            self._view, self._built_at = view, version
            return view

    def run(self, stop: threading.Event, interval: float) -> None:
        """Refresh whenever the cluster changed, at most every ``interval`` seconds."""
        while not stop.wait(interval):
            if self._source.version != self._built_at:
                try:
                    self.refresh()
                except Exception:  # a bad object must not stop queue decisions for good
                    log.exception("could not rebuild the queue view")

    def hold(self, pod: Pod) -> str | None:
        """Why ``pod``'s group may not start now by its queue's rules, or ``None`` if it may."""
        view = self._view
        if view is None:
            return None
        members = self._source.members(pod.group_key) if pod.group_key else [pod]
        try:
            group = pending_group(pod, members, view.tree)
        except QueueError as exc:
            if self._source.version == self._built_at:
                return str(exc)
            # The queue may have been created since the last refresh; kube-scheduler does not watch
            # Queues, so a stale "does not exist" would park the pod until its next retry.
            view = self.refresh()
            try:
                group = pending_group(pod, members, view.tree)
            except QueueError as again:
                return str(again)
        state = view.states.get(group.queue)
        if state is None:
            return None
        extra = self._in_flight(view, group.key, group.queue)
        state = replace(state, allocated=plus(state.allocated, extra))
        free = self._free()
        ahead = view.ahead_of(group.key, free, limit=AHEAD_CHECKED)
        admission = admit(group, state, self._still_pending(ahead), free=free)
        if not admission.ok:
            return admission.reason
        uids = frozenset(m.uid for m in members if m.node_name is None)
        with self._admitted_lock:
            self._admitted[group.key] = (group.queue, group.requests, uids, self._clock() + ADMITTED_TTL)
        return None

    def _free(self) -> Resources:
        """Free capacity now, from the current snapshot (not the view, which lags), memoised per snapshot."""
        snapshot, book = self._source.snapshot(), self._ledger.book
        cached = self._free_cache
        if cached is not None and cached[0] is snapshot and cached[1] is book:
            return cached[2]
        free = snapshot.free_total(book)
        self._free_cache = (snapshot, book, free)
        return free

    def _still_pending(self, ahead: Sequence[PendingGroup]) -> tuple[PendingGroup, ...]:
        """The groups ahead that are still waiting now (the view may list some placed since it was built)."""
        waiting = []
        for group in ahead:
            members = self._source.members(group.key)
            if members:
                if any(m.node_name is None and not m.terminating for m in members):
                    waiting.append(group)
                continue
            namespace, _, name = group.key.partition("/")
            pod = self._source.pod(namespace, name)
            if pod is not None and pod.node_name is None and not pod.terminating:
                waiting.append(group)
        return tuple(waiting)

    def _in_flight(self, view: QueueView, key: str, queue: str) -> Resources:
        """What groups admitted but not yet in the view hold in ``queue`` (``key``'s own excluded)."""
        now = self._clock()
        extra = Resources()
        with self._admitted_lock:
            for other, (q, requests, uids, expires) in list(self._admitted.items()):
                if expires < now or (uids and uids <= view.counted):
                    del self._admitted[other]
                elif other != key and q == queue:
                    extra = plus(extra, requests)
        return extra

    def narrow(
        self, pod: Pod, proposed: Mapping[str, tuple[tuple[str, ...], int]]
    ) -> tuple[dict[str, tuple[tuple[str, ...], int]], tuple[str, ...]]:
        """Keep the victims ``pod`` may preempt within its queue, whole gangs only; return reasons too."""
        view = self._view or self.refresh()
        tree = view.tree
        try:
            queue = tree.workload_queue(pod.labels.get(QUEUE_LABEL))
        except QueueError as exc:
            return {}, (str(exc),)
        preemptor = Preemptor(group_key(pod), queue, pod.priority, pod.group_key)
        victims: dict[str, list[VictimPod]] = {}
        gangs: dict[str, list[GangMember]] = {}
        for node, (uids, _) in proposed.items():
            for uid in uids:
                victim = self._source.pod_by_uid(uid)
                if victim is None:
                    continue
                victims.setdefault(node, []).append(self._victim(victim, tree))
                if victim.group_key and victim.group_key not in gangs:
                    gangs[victim.group_key] = [
                        GangMember(m.node_name, self._victim(m, tree))
                        for m in self._source.members(victim.group_key)
                        if m.node_name is not None
                    ]
        decision = preempt_within_queue(preemptor, victims, gangs, tree=tree, now=self._clock())
        kept = {node: (uids, proposed[node][1]) for node, uids in decision.victims.items() if uids}
        return kept, decision.reasons

    @staticmethod
    def _victim(pod: Pod, tree: QueueTree) -> VictimPod:
        try:
            queue = tree.workload_queue(pod.labels.get(QUEUE_LABEL))
        except QueueError:
            queue = ""
        return VictimPod(
            uid=pod.uid,
            key=pod.key,
            queue=queue,
            priority=pod.priority,
            preemptible=is_preemptible(pod.priority, pod.labels.get(PREEMPTIBLE_LABEL)),
            gang=pod.group_key,
            started_at=pod.started_at,
        )
