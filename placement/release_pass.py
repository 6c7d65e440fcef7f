"""The release pass: ungate the groups the core releases, tell the others why they wait.

Pods of scheduler ``phalanx`` are created gated (the gate webhook, ``placement.webhook``); this pass,
run by the leader only, decides from one snapshot which groups may enter kube-scheduler's queue now
(``scheduling.admission.release.release``) and removes their gate with a guarded patch per pod
(``kubeio.gate_patches.GateWriter``). A patch refused because the pod changed leaves the group gated in the
book's eyes, so the next pass, on fresher facts, decides again; a half-released gang is finished by the
next pass (the released part counts as in flight). Nothing here is needed after a restart: a new leader
adopts every ungated, unbound group as released now (``scheduling.admission.flight``).

Every release is an event on the group (``AdmissionReleased``) and every group kept gated gets its
sentence as an event (``AdmissionWaiting``), again only when the sentence's rule changes or a minute has
passed, so a long wait does not flood the API server.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial

from kubeio.errors import KubeError
from kubeio.events import ObjectRef
from kubeio.ports import ClusterSource, EventSink, Ungater
from kubeio.render import pod_ref, podgroup_ref
from placement.views import SharedView
from scheduling.admission.release import GateSettings, Released, ReleasedBook, release
from scheduling.cluster.promises import PromiseBook
from scheduling.cluster.snapshot import ClusterSnapshot
from scheduling.model import Pod
from scheduling.reasons import sentence_rule
from scheduling.topology import TopologyCache

log = logging.getLogger(__name__)

WAITING_EVENT_EVERY = 60.0
"""Seconds between two ``AdmissionWaiting`` events of one group while its sentence's rule stays the same."""

UNGATING_AT_ONCE = 8
"""Groups released at the same time: their event and one PATCH per pod are the pass's main cost after
deciding, and a pass that released 50 single pods one call after another kept the next pass (and every
gated pod) waiting for them. A group's own pods go one after another, so a refused patch still stops the
rest of its group."""

WAITING_EVENT_AFTER = 5.0
"""A group kept gated gets its first ``AdmissionWaiting`` event once it has waited this long: most groups
are released within a pass or two (a gang's members still being created, say) and need no sentence."""


@dataclass(frozen=True, slots=True)
class ReleaseReport:
    """What one pass did: groups released (their pods ungated), groups kept gated, patches refused.

    Attributes:
        released: groups whose pods were all ungated.
        kept: how many groups stay gated.
        refused: groups whose ungate patch was refused (decided again next pass).
        in_flight_gpus: GPUs released and not bound yet.
        idle: GPUs free while groups wait gated, by rule (``ReleaseDecision.idle``).
        decide_seconds: how long deciding took, before ungating.
    """

    released: tuple[str, ...] = ()
    kept: int = 0
    refused: tuple[str, ...] = ()
    in_flight_gpus: int = 0
    idle: Mapping[str, int] = field(default_factory=dict)
    decide_seconds: float = 0.0


class ReleasePass:
    """Runs release passes and remembers, between them, when each group was released."""

    def __init__(
        self,
        source: ClusterSource,
        ungater: Ungater,
        events: EventSink,
        *,
        clock: Callable[[], float],
        topologies: TopologyCache,
        settings: GateSettings,
        views: SharedView | None = None,
        timer: Callable[[], float] = time.perf_counter,
    ) -> None:
        self._source = source
        self._timer = timer  # monotonic seconds, for ``decide_seconds``
        self._pool = ThreadPoolExecutor(UNGATING_AT_ONCE, thread_name_prefix="ungate")
        self._ungater = ungater
        self._events = events
        self._clock = clock  # wall clock: release times meet creationTimestamps
        self._topologies = topologies
        self._settings = settings
        self._book = ReleasedBook()
        self._views = views or SharedView()
        self._told: dict[str, tuple[str, float]] = {}  # group -> (rule of its last sentence, when)
        self._kept_since: dict[str, float] = {}

    def run(self) -> ReleaseReport:
        """One pass: decide, ungate the released groups (several at once), record the events."""
        started = self._timer()
        snapshot = self._source.snapshot()
        now = self._clock()
        view = self._views.of(snapshot)
        decision = release(
            snapshot, PromiseBook(), view, self._book, self._topologies, now=now, settings=self._settings
        )
        decided = self._timer() - started
        book = decision.in_flight
        released: list[str] = []
        refused: list[str] = []
        ungated = list(self._pool.map(partial(self._release, snapshot), decision.released))
        for group, done in zip(decision.released, ungated, strict=True):
            if done:
                released.append(group.group)
            else:
                refused.append(group.group)
                book = book.without(group.group)
        self._book = book
        waiting = {k.group for k in decision.kept}
        for kept in decision.kept:
            if now - self._kept_since.get(kept.group, now) >= WAITING_EVENT_AFTER:
                self._tell(snapshot, kept.group, kept.reason, now)
        self._told = {g: told for g, told in self._told.items() if g in waiting}
        self._kept_since = {g: self._kept_since.get(g, now) for g in waiting}
        gpus = _in_flight_gpus(snapshot, book)
        return ReleaseReport(
            tuple(released), len(decision.kept), tuple(refused), gpus, decision.idle, decided
        )

    def _release(self, snapshot: ClusterSnapshot, group: Released) -> bool:
        """Tell, then ungate one released group (one task of the pool; ``False``: a patch was refused).

        The event comes before the ungating (``EventRecorder.record_now``), which a crash cannot then
        separate from it; a patch refused leaves the group to the next pass, which decides again.
        """
        self._record(
            snapshot, group.group, group.pods, "AdmissionReleased", f"released: {group.reason}", now=True
        )
        return self._ungate(snapshot, group.pods)

    def _ungate(self, snapshot: ClusterSnapshot, keys: Sequence[str]) -> bool:
        """Ungate every pod of ``keys``; ``False`` as soon as one is refused (the rest wait a pass)."""
        for key in keys:
            namespace, _, name = key.partition("/")
            pod = snapshot.pod(namespace, name)
            if pod is None:
                continue
            try:
                if not self._ungater.ungate(pod):
                    log.info("admission: %s changed since the pass read it; decided again next pass", key)
                    return False
            except KubeError as exc:
                log.warning("admission: %s not ungated: %s", key, exc)
                return False
        return True

    def _tell(self, snapshot: ClusterSnapshot, group: str, reason: str, now: float) -> None:
        """Record ``reason`` for a kept group when its sentence, figures aside, changed or a minute passed."""
        rule = sentence_rule(reason)
        told = self._told.get(group)
        if told is not None and told[0] == rule and now - told[1] < WAITING_EVENT_EVERY:
            return
        self._told[group] = (rule, now)
        pods = tuple(p.key for p in _pods_of(snapshot, group))
        self._record(snapshot, group, pods, "AdmissionWaiting", f"kept gated: {reason}")

    def _record(
        self,
        snapshot: ClusterSnapshot,
        group: str,
        pods: Sequence[str],
        reason: str,
        text: str,
        *,
        now: bool = False,
    ) -> None:
        write = self._events.record_now if now else self._events.record
        for ref in _refs(snapshot, group, pods):
            write(ref, "Normal", reason, text)


def _pods_of(snapshot: ClusterSnapshot, group: str) -> list[Pod]:
    members = snapshot.members(group)
    if members:
        return list(members)
    namespace, _, name = group.partition("/")
    pod = snapshot.pod(namespace, name)
    return [pod] if pod is not None else []


def _refs(snapshot: ClusterSnapshot, group: str, pods: Sequence[str]) -> list[ObjectRef]:
    """Where a group's admission events go: its PodGroup for a gang, else the pod itself."""
    podgroup = snapshot.podgroup(group)
    if podgroup is not None:
        return [podgroup_ref(podgroup)]
    refs = []
    for key in pods[:1]:
        namespace, _, name = key.partition("/")
        pod = snapshot.pod(namespace, name)
        if pod is not None:
            refs.append(pod_ref(pod))
    return refs


def _in_flight_gpus(snapshot: ClusterSnapshot, book: ReleasedBook) -> int:
    """GPUs of the pods released and not bound yet (for the metric)."""
    return sum(p.requests.gpus for g in book.at for p in _pods_of(snapshot, g) if p.node_name is None)
