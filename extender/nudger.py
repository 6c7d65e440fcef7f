"""Wake pods that phalanx turned down once room may have appeared for them.

kube-scheduler retries a pod the extender rejected only when a cluster event it watches arrives
(extender-protocol.md §2.3, the "Extender" pseudo-plugin). Its informer and ours see events at slightly
different moments: a pod can be filtered just after kube-scheduler saw room free up but before our cache
did, be turned down, and then wait up to five minutes for the next event. kube-scheduler does not watch
phalanx's Queues at all, so a pod held by a queue rule (or by a queue that did not exist yet) would also
wait when the admin raises a limit or creates the queue. So after phalanx turns a pod down, and once its
own cache shows capacity freed (a pod left a node) or a Queue's spec changed, it touches the turned-down
pods (an annotation bump, which kube-scheduler treats as a pod update and requeues on). Bounded: at most
``batch`` groups per round, at most one round per ``interval``.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Protocol

from kubeio.errors import KubeError
from scheduling.model import Pod

log = logging.getLogger(__name__)

NUDGE_ANNOTATION = "phalanx.io/nudge"


class PodToucher(Protocol):
    """Bumps an annotation on a pod (``kubeio.binding.PodBinder.touch``)."""

    def touch(self, namespace: str, name: str, key: str, value: str) -> None:
        """Merge-patch one annotation."""


class Nudger:
    """Remembers turned-down pods and touches them after capacity is freed."""

    def __init__(self, toucher: PodToucher, *, clock: Callable[[], float], batch: int = 32) -> None:
        self._toucher = toucher
        self._clock = clock
        self._batch = batch
        self._lock = threading.Lock()
        self._parked: OrderedDict[str, tuple[str, str]] = OrderedDict()
        self._wake = threading.Event()
        self._round = 0

    def turned_down(self, pod: Pod) -> None:
        """Filter found no node for ``pod``: remember it (oldest first, bounded)."""
        with self._lock:
            self._parked[pod.uid] = (pod.namespace, pod.name)
            self._parked.move_to_end(pod.uid)
            while len(self._parked) > 10_000:
                self._parked.popitem(last=False)

    def queues_changed(self) -> None:
        """Cache queue listener: a queue rule may have changed, so held pods may now be admitted."""
        self._wake.set()

    def pod_changed(self, old: Pod | None, new: Pod | None) -> None:
        """Cache listener: note freed capacity, and forget pods that got bound or left."""
        if old is not None and old.holds_resources and (new is None or not new.holds_resources):
            self._wake.set()
        pod = new or old
        if pod is not None and (new is None or new.node_name is not None):
            with self._lock:
                self._parked.pop(pod.uid, None)

    def run(self, stop: threading.Event, interval: float = 1.0) -> None:
        """Touch parked pods after capacity was freed or a queue changed, until ``stop`` is set."""
        while not stop.is_set():
            if not self._wake.wait(interval):
                continue
            stop.wait(interval)  # let our cache settle, and batch the frees of one eviction
            self._wake.clear()
            with self._lock:
                batch = list(self._parked.items())[: self._batch]
            self._round += 1
            for uid, (namespace, name) in batch:
                try:
                    self._toucher.touch(namespace, name, NUDGE_ANNOTATION, str(self._round))
                except KubeError as exc:
                    log.debug("could not nudge %s/%s: %s", namespace, name, exc)
                    with self._lock:
                        self._parked.pop(uid, None)
