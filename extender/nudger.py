"""Wake pods that phalanx turned down once room may have appeared for them.

kube-scheduler retries a pod the extender rejected only when a cluster event it watches arrives
(docs/design/extender-protocol.md §2.3, the "Extender" pseudo-plugin). Its informer and ours see events at
slightly different moments: a pod can be filtered just after kube-scheduler saw room free up but before our
cache did, be turned down, and then wait up to five minutes for the next event. kube-scheduler does not watch
phalanx's Queues at all, so a pod held by a queue rule (or by a queue that did not exist yet) would also
wait when the admin raises a limit or creates the queue. So after phalanx turns a pod down, and once its
own cache shows capacity freed (a pod left a node) or a Queue's spec changed, it touches the turned-down
pods (an annotation bump, which kube-scheduler treats as a pod update and requeues on). Bounded: at most
``batch`` groups per round, at most one round per ``interval``.

A group held by the queue rule "groups ahead keep their room" may pass once the fair order changes (it
was held against a view built before it existed, or the group ahead started); kube-scheduler sees no
event for that, so after each rebuild of the queue view the pods so held whose groups ahead moved are
touched (``scheduling.admission.queue_hold.no_longer_ahead`` decides).

A gang's members are turned down while the gang waits for members; when the last one arrives and the
whole gang is reserved, the members turned down before must come back at once, or the first of them
waits at the bind barrier until it times out (every new MPIJob would lose ~25 s). Those are
touched right away, with no settling delay (``reserved``).

A gang that can never be reserved (larger than the cluster, say) gets no such wake-up, so a member
turned down as "waiting for members: 1 of 4 pods exist" would keep that reason after all four exist.
Each parked pod remembers the rule of the sentence it was told (``scheduling.reasons.sentence_rule``);
when another member of its gang is told a sentence of another rule, the parked ones are touched at once
and hear it too (``group_told``). Figures alone ("2 of 4") do not wake them: a 64-member gang created
one by one would otherwise touch its members 2,016 times.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from kubeio.errors import KubeError
from kubeio.ports import PodToucher
from scheduling.model import Pod
from scheduling.reasons import sentence_rule

log = logging.getLogger(__name__)

NUDGE_ANNOTATION = "phalanx.io/nudge"

PARKED_KEPT = 10_000
"""Turned-down pods remembered at once (the oldest is forgotten first)."""


@dataclass(frozen=True, slots=True)
class _Parked:
    """A turned-down pod: where it is, its gang (empty for a pod on its own), the rule it was told."""

    namespace: str
    name: str
    group: str
    rule: str


class Nudger:
    """Remembers turned-down pods and touches them after capacity is freed, or their gang is reserved."""

    def __init__(self, toucher: PodToucher, *, clock: Callable[[], float], batch: int = 32) -> None:
        self._toucher = toucher
        self._clock = clock
        self._batch = batch
        self._lock = threading.Lock()
        self._parked: OrderedDict[str, _Parked] = OrderedDict()
        self._by_group: dict[str, dict[str, None]] = {}  # gang -> uids of its parked members
        self._urgent: OrderedDict[str, tuple[str, str]] = OrderedDict()
        self._held_for_ahead: OrderedDict[str, tuple[str, str, str, tuple[str, ...]]] = OrderedDict()
        self._freed = False
        self._signal = threading.Event()
        self._round = 0

    def turned_down(self, pod: Pod, told: str = "") -> None:
        """Filter found no node for ``pod`` and told it ``told``: remember it (oldest first, bounded)."""
        group = pod.group_key or ""
        with self._lock:
            self._unpark(pod.uid)
            self._parked[pod.uid] = _Parked(pod.namespace, pod.name, group, sentence_rule(told))
            if group:
                self._by_group.setdefault(group, {})[pod.uid] = None
            while len(self._parked) > PARKED_KEPT:
                self._unpark(next(iter(self._parked)))

    def group_told(self, group: str, told: str) -> None:
        """A member of ``group`` was just told ``told``: members parked with another rule hear it now."""
        rule = sentence_rule(told)
        with self._lock:
            stale = [uid for uid in self._by_group.get(group, {}) if self._parked[uid].rule != rule]
            for uid in stale:
                parked = self._unpark(uid)
                if parked is not None:
                    self._urgent[uid] = (parked.namespace, parked.name)
        if stale:
            self._signal.set()

    def _unpark(self, uid: str) -> _Parked | None:
        """Forget a parked pod (the caller holds the lock)."""
        parked = self._parked.pop(uid, None)
        if parked is not None and parked.group:
            members = self._by_group.get(parked.group, {})
            members.pop(uid, None)
            if not members:
                self._by_group.pop(parked.group, None)
        return parked

    def held_for_ahead(self, pod: Pod, group: str, ahead: tuple[str, ...]) -> None:
        """The queue hold held ``pod`` (of ``group``) for the room of the groups ``ahead``."""
        with self._lock:
            self._held_for_ahead[pod.uid] = (pod.namespace, pod.name, group, ahead)
            self._held_for_ahead.move_to_end(pod.uid)
            while len(self._held_for_ahead) > 10_000:
                self._held_for_ahead.popitem(last=False)

    def view_rebuilt(self, moved: Callable[[str, tuple[str, ...]], bool]) -> None:
        """A new queue view: touch at once the pods held for groups ``moved`` says are no longer ahead."""
        with self._lock:
            woken = [uid for uid, (_, _, group, ahead) in self._held_for_ahead.items() if moved(group, ahead)]
            for uid in woken:
                namespace, name, _, _ = self._held_for_ahead.pop(uid)
                self._urgent[uid] = (namespace, name)
        if woken:
            self._signal.set()

    def reserved(self, uids: Iterable[str]) -> None:
        """A gang was just reserved: touch its members that were turned down while it waited, now."""
        with self._lock:
            for uid in uids:
                parked = self._unpark(uid)
                if parked is not None:
                    self._urgent[uid] = (parked.namespace, parked.name)
            if not self._urgent:
                return
        self._signal.set()

    def queues_changed(self) -> None:
        """A queue rule or a queue's allocation changed, so held pods may now be admitted."""
        self._wake()

    def room_freed(self) -> None:
        """GPUs promised to a gang were given back: kube-scheduler sees no event for that, as for a queue."""
        self._wake()

    def pod_changed(self, old: Pod | None, new: Pod | None) -> None:
        """Cache listener: note freed capacity, and forget pods that got bound or left."""
        if old is not None and old.holds_resources and (new is None or not new.holds_resources):
            self._wake()
        pod = new or old
        if pod is not None and (new is None or new.node_name is not None):
            with self._lock:
                self._unpark(pod.uid)
                self._urgent.pop(pod.uid, None)
                self._held_for_ahead.pop(pod.uid, None)

    def _wake(self) -> None:
        with self._lock:
            self._freed = True
        self._signal.set()

    def run(self, stop: threading.Event, interval: float = 1.0) -> None:
        """Touch pods when woken, until ``stop`` is set.

        A reserved gang's members are touched at once; parked pods after capacity was freed or a queue
        changed, ``interval`` later, so our cache settles and the frees of one eviction make one round.
        """
        while not stop.is_set():
            if not self._signal.wait(interval):
                continue
            self._signal.clear()
            with self._lock:
                urgent, self._urgent = list(self._urgent.items()), OrderedDict()
                freed = self._freed
            if urgent:
                self._touch(urgent)
            if not freed:
                continue
            stop.wait(interval)
            with self._lock:
                self._freed = False
                batch = [(uid, (p.namespace, p.name)) for uid, p in list(self._parked.items())[: self._batch]]
            self._touch(batch)

    def _touch(self, batch: list[tuple[str, tuple[str, str]]]) -> None:
        self._round += 1
        for uid, (namespace, name) in batch:
            try:
                self._toucher.touch(namespace, name, NUDGE_ANNOTATION, str(self._round))
            except KubeError as exc:
                log.debug("could not nudge %s/%s: %s", namespace, name, exc)
                with self._lock:
                    self._unpark(uid)
