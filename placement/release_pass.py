"""The release pass: ungate the groups the core releases, tell the others why they wait.

Pods of scheduler ``phalanx`` are created gated (the gate webhook, ``placement.webhook``); this pass,
run by the leader only, decides from one snapshot which groups may enter kube-scheduler's queue now
(``scheduling.admission.release.release``) and removes their gate with a guarded patch per pod
(``kubeio.gate_patches.GateWriter``). A patch refused because the pod changed leaves the group gated in the
book's eyes, so the next pass, on fresher facts, decides again; a half-released gang is finished by the
next pass (the released part counts as in flight). Nothing here is needed after a restart: a new leader
adopts every ungated, unbound group as released now (``scheduling.admission.flight``).

Events tell a wait, not every pass of the gate. A group kept gated gets its sentence as an event
(``AdmissionWaiting``) once it has waited longer than its rule makes usual, and again only when the
sentence's rule changes or a minute has passed, so a long wait does not flood the API server. A release
is an event (``AdmissionReleased``) on a gang's PodGroup, one per gang, and on a pod on its own only
when it closes a wait the pod was told of: a pod let in at once, or held a moment behind the pods in
flight, gets kube-scheduler's ``Scheduled`` and nothing from phalanx. An event per pod per gate was two
of the three event writes per pod that a backlog of single pods cost the API server
(docs/design/admission-gates.md, "Events"); ``phalanx why`` decides a gated pod's sentence afresh and
needs none of them.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from functools import partial
from types import MappingProxyType

from kubeio.errors import KubeError
from kubeio.events import ObjectRef
from kubeio.plan_seal import PlanSeal
from kubeio.ports import Annotator, ClusterSource, EventSink, PodNominator, Ungater
from kubeio.render import plan_gang_annotations, pod_ref, podgroup_ref
from placement.views import SharedView
from scheduling.admission.door import decide_at_door
from scheduling.admission.outcome import KeptRule, PodPlan
from scheduling.admission.release import GateSettings, Released, ReleasedBook, release
from scheduling.cluster.promises import PromiseBook
from scheduling.cluster.snapshot import ClusterSnapshot, with_pods
from scheduling.cluster.statement import StatementChain
from scheduling.model import PLAN_ANNOTATION, Pod
from scheduling.reasons import sentence_rule
from scheduling.timestamps import timestamp
from scheduling.topology import TopologyCache

log = logging.getLogger(__name__)

_NO_PLAN: Mapping[str, str] = MappingProxyType({})

WAITING_EVENT_EVERY = 60.0
"""Seconds between two ``AdmissionWaiting`` events of one group while its sentence's rule stays the same."""

UNGATING_AT_ONCE = 8
"""Groups released at the same time: their event and one PATCH per pod are the pass's main cost after
deciding, and a pass that released 50 single pods one call after another kept the next pass (and every
gated pod) waiting for them. A group's own pods go one after another, so a refused patch still stops the
rest of its group."""

DOOR_WAIT = 0.2
"""Seconds the door waits for a running pass's decision before it gates the pod (the webhook's answer
must be quick; the pass then releases the pod like any other)."""

ARRIVING_SECONDS = 5.0
"""Seconds a pod let in at the door counts in the door's answers while the cache does not show it: its
creation may have failed after the webhook answered (a quota refused it), or no API server sent the
review, and it must not hold room for long."""

MAX_ARRIVING = 64
"""Pods let in at the door and not seen by the cache yet, at most; the door gates the next while full."""


@dataclass(frozen=True, slots=True)
class _Arrival:
    """A pod let in at the door: as the review brought it, when, and the door's sentence for its event."""

    pod: Pod
    at: float
    reason: str


WAITING_EVENT_AFTER = 5.0
"""A group kept gated gets its first ``AdmissionWaiting`` event once it has waited this long: most groups
are released within a pass or two (a gang's members still being created, say) and need no sentence."""

WAITING_EVENT_AFTER_BY_RULE: Mapping[KeptRule, float] = {KeptRule.BUDGET: WAITING_EVENT_EVERY}
"""Rules whose groups wait longer before their first ``AdmissionWaiting`` event. A group kept only by the
in-flight budget is in line behind pods kube-scheduler is placing: a backlog of a thousand single pods
drains in tens of seconds, and a sentence for each would cost the API server a write per pod while
saying only "your turn is coming". One that waits a minute is told: kube-scheduler is slow to place."""


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
        nominator: PodNominator | None = None,
        annotator: Annotator | None = None,
        seal: PlanSeal | None = None,
    ) -> None:
        """Release through ``ungater``; with a ``nominator``, each placed pod is nominated first.

        With plans carried on pods (``GateSettings.plan_on_pod``), every plan written is sealed with
        ``seal`` (``kubeio.plan_seal``: the sidecar follows no other), and ``annotator`` writes the new
        plans of pods in flight planned again.

        Raises:
            ValueError: plans are carried on pods and ``seal`` is ``None``.
        """
        if settings.plan_on_pod and seal is None:
            msg = "plans carried on pods need a seal: the framework sidecar follows only sealed plans"
            raise ValueError(msg)
        self._seal = seal
        self._source = source
        self._nominator = nominator
        self._annotator = annotator
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
        self._lock = threading.Lock()  # the book and the arriving pods: the pass and the door share them
        self._arriving: dict[str, _Arrival] = {}  # let in at the door, not seen by the cache yet
        self._chain = StatementChain()  # under the lock: each decision starts from the last one's orders

    def run(self) -> ReleaseReport:
        """One pass: decide, ungate the released groups (several at once), record the events.

        The decision and the book it leaves are made under the lock the door shares (``admit``); the
        ungating is not, and while it lasts the door sees the released pods still gated and lets nothing in.
        The pass decides on the cache's snapshot alone: a pod let in at the door counts here once the
        cache shows it (a few milliseconds later), so a review no API server sent (anyone who reaches
        the webhook can post one) changes the door's answers for a few seconds, never the pass's.
        """
        started = self._timer()
        with self._lock:
            snapshot = self._source.snapshot()
            now = self._clock()
            seen = self._seen(snapshot, now)
            decision = release(
                snapshot,
                PromiseBook(),
                self._views.of(snapshot),
                self._book,
                self._topologies,
                now=now,
                settings=self._settings,
                chain=self._chain,
            )
            self._book = decision.in_flight
        decided = self._timer() - started
        for pod, reason in seen:  # no event: nothing was told to wait (the module's docstring)
            log.debug("admission: %s released as it was created: %s", pod.key, reason)
        released: list[str] = []
        refused: list[str] = []
        ungated = list(self._pool.map(partial(self._release, snapshot), decision.released))
        for group, done in zip(decision.released, ungated, strict=True):
            if done:
                released.append(group.group)
            else:
                refused.append(group.group)
        if refused:
            with self._lock:
                for key in refused:
                    self._book = self._book.without(key)
        book = self._book
        self._replan(snapshot, decision.replanned)
        waiting = {k.group for k in decision.kept}
        for kept in decision.kept:
            after = WAITING_EVENT_AFTER_BY_RULE.get(kept.rule, WAITING_EVENT_AFTER)
            if now - self._kept_since.get(kept.group, now) >= after:
                self._tell(snapshot, kept.group, kept.reason, now)
        self._told = {g: told for g, told in self._told.items() if g in waiting}
        self._kept_since = {g: self._kept_since.get(g, now) for g in waiting}
        gpus = _in_flight_gpus(snapshot, book)
        return ReleaseReport(
            tuple(released), len(decision.kept), tuple(refused), gpus, decision.idle, decided
        )

    def _replan(self, snapshot: ClusterSnapshot, plans: Sequence[PodPlan]) -> None:
        """Write the new plan of each pod in flight whose plan no longer held (``ReleaseDecision.replanned``).

        Each new plan is told on its pod (event ``Replanned``, with why). A write that fails is logged:
        the pod keeps its old plan, kube-scheduler keeps turning it down with the reason, and the next
        pass plans it again.
        """
        if self._annotator is None:
            return
        for plan in plans:
            pod = snapshot.pod(*_split(plan.pod))
            if pod is None:
                continue
            written = self._annotations(plan)
            try:
                self._annotator.set(pod.namespace, pod.name, pod.uid, written)
            except KubeError as exc:
                log.warning("admission: new plan %s of %s not written: %s", written, plan.pod, exc)
                continue
            text = f"planned again on {written.get(PLAN_ANNOTATION)}: {plan.why}"
            log.info("admission: %s %s", pod.key, text)
            self._events.record(pod_ref(pod), "Normal", "Replanned", text)

    def _annotations(self, plan: PodPlan) -> Mapping[str, str]:
        """``plan`` as the annotations written on its pod: the plan and its seal, made now."""
        if self._seal is None:  # the constructor lets this be only when no plan is carried
            return _NO_PLAN
        return self._seal.annotations(plan.pod, plan.node, plan.gpus, self._clock())

    def admit(self, pod: Pod) -> Released | None:
        """Release ``pod`` as it is created, or ``None``: it takes the gate (``scheduling.admission.door``).

        Called by the gate webhook, on its own thread, with the pod the review brings. A pod let in is
        kept beside the cache's snapshot until the cache sees it (at most ``ARRIVING_SECONDS``: its
        creation may yet fail), so the door's next answers count it in flight; its event is written by
        the pass that first sees it, on the pod the API server stored. At most ``MAX_ARRIVING`` pods wait
        so, and the door waits for a running pass's decision at most ``DOOR_WAIT`` seconds: past
        either, it gates (the webhook must answer fast, and reviews no API server sent must not pile up).
        """
        if not self._lock.acquire(timeout=DOOR_WAIT):
            return None
        try:
            base = self._source.snapshot()
            now = self._clock()
            self._seen(base, now)
            if len(self._arriving) >= MAX_ARRIVING:
                return None
            answer = decide_at_door(
                with_pods(base, [a.pod for a in self._arriving.values()]),
                PromiseBook(),
                self._views.of(base),
                self._book,
                pod,
                self._topologies,
                now=now,
                settings=self._settings,
                chain=self._chain,
            )
            if isinstance(answer, str):
                log.debug("admission: %s gated as it is created: %s", pod.key, answer)
                return None
            self._book = self._book.with_released([answer.group], now)
            # Keyed by name beside the snapshot: the review's UID is no pod's, and two reviews may share one.
            # With plans carried, it arrives with the one the webhook writes on it, so the next
            # decisions hold it there.
            plan = next(((p.node, p.gpus) for p in answer.plans), None)
            arrived = replace(pod, uid=f"arriving:{pod.key}", created=timestamp(now), plan=plan)
            self._arriving[pod.key] = _Arrival(arrived, now, answer.reason)
            return answer
        finally:
            self._lock.release()

    def let_in(self, pod: Pod) -> Mapping[str, str] | None:
        """``admit`` as the gate webhook's door asks it (``placement.webhook.Door``).

        ``None`` gates the pod; else the annotations it goes in with: its plan when plans are carried
        on pods (the webhook writes it with its stamp, so the pod is never seen ungated without it),
        else none.
        """
        released = self.admit(pod)
        if released is None:
            return None
        return next((self._annotations(p) for p in released.plans), _NO_PLAN)

    def _seen(self, base: ClusterSnapshot, now: float) -> list[tuple[Pod, str]]:
        """Drop the pods let in at the door that ``base`` shows, or that lapsed; the first with their reason.

        Call under the lock. A pod ``base`` shows gated or unstamped under that name is another pod than
        the one let in (a later answer gated it, or a pod of that name existed already): no event.
        """
        seen: list[tuple[Pod, str]] = []
        kept: dict[str, _Arrival] = {}
        for key, arrival in self._arriving.items():
            stored = base.pod(arrival.pod.namespace, arrival.pod.name)
            if stored is not None:
                if stored.gate_stamped and not stored.gated:
                    seen.append((stored, arrival.reason))
            elif now - arrival.at <= ARRIVING_SECONDS:
                kept[key] = arrival
            else:
                log.info("admission: %s let in as it was created but never seen; forgotten", key)
        self._arriving = kept
        return seen

    def _release(self, snapshot: ClusterSnapshot, group: Released) -> bool:
        """Tell, then ungate one released group (one task of the pool; ``False``: a patch was refused).

        The event, for a gang or a group told it waits, comes before the ungating
        (``EventRecorder.record_now``), which a crash cannot then separate from it; a patch refused
        leaves the group to the next pass, which decides again. Other groups are only logged.
        """
        if snapshot.podgroup(group.group) is not None or group.group in self._told:
            self._record(
                snapshot, group.group, group.pods, "AdmissionReleased", f"released: {group.reason}", now=True
            )
        else:
            log.debug("admission: %s released: %s", group.group, group.reason)
        plans = {plan.pod: self._annotations(plan) for plan in group.plans}
        if len(plans) > 1 and snapshot.podgroup(group.group) is not None:  # a gang binds whole
            barrier = plan_gang_annotations(group.group, len(plans))
            plans = {pod: {**written, **barrier} for pod, written in plans.items()}
        return self._ungate(snapshot, group.pods, dict(group.nodes), plans)

    def _ungate(
        self,
        snapshot: ClusterSnapshot,
        keys: Sequence[str],
        nodes: Mapping[str, str],
        plans: Mapping[str, Mapping[str, str]],
    ) -> bool:
        """Ungate every pod of ``keys``; ``False`` as soon as one is refused (the rest wait a pass).

        The pods the pass placed are nominated to their nodes first, all of them before the first gate
        comes off (``nodes``): kube-scheduler, seeing a pod ungated, tries that node alone before any
        other (``kubeio.nominations``), and the extender reserves a gang as nominated only when every
        member already is (``scheduling.gang.filter.as_nominated``). A nomination that fails costs only
        that: the pod is ungated all the same and tried on every node. A pod with a plan (``plans``, when
        plans are carried on pods) gets it in its ungating patch.
        """
        pods = [(key, snapshot.pod(*_split(key))) for key in keys]
        if self._nominator is not None:
            for key, pod in pods:
                node = nodes.get(key)
                if pod is None or node is None:
                    continue
                try:
                    self._nominator.nominate(pod.namespace, pod.name, pod.uid, node)
                except KubeError as exc:
                    log.info("admission: %s not nominated to %s: %s", key, node, exc)
        for key, pod in pods:
            if pod is None:
                continue
            try:
                if not self._ungater.ungate(pod, plans.get(key, _NO_PLAN)):
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


def _split(key: str) -> tuple[str, str]:
    """``namespace/name`` as its two parts (a key without ``/`` names no pod: an empty namespace)."""
    namespace, _, name = key.partition("/")
    return namespace, name


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
