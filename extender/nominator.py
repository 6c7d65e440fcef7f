"""Writes gang members' nominated nodes, so kube-scheduler tries each on its reserved node first.

Who is nominated where is the core's (``scheduling.gang.nomination``); this thread writes the changes
after each reservation (``wake``) and once per ``interval`` for what it missed (a member created after
its gang was reserved, a reservation that lapsed). The writes go a few at a time: a 256-member gang's
nominations must reach kube-scheduler before it pops the members from its queue, or they pay the full
Filter pass the nomination is there to spare.

What was written is remembered until the pod is bound or gone, so a nomination is written once and
cleared when its promise ends. A nomination kube-scheduler clears itself (after a failed scheduling or
binding cycle of that member) is not written again: that member's next try looks at every node, as it
would have without one.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from kubeio.errors import KubeError
from kubeio.ports import PodNominator
from scheduling.cluster.promises import PromiseBook
from scheduling.cluster.snapshot import ClusterSnapshot
from scheduling.gang.nomination import Nomination, changes, nominations

log = logging.getLogger(__name__)


class Nominator:
    """Keeps gang members' ``status.nominatedNodeName`` in step with their reservations."""

    def __init__(
        self,
        writer: PodNominator,
        book: Callable[[], PromiseBook],
        snapshot: Callable[[], ClusterSnapshot],
        *,
        concurrency: int = 4,
    ) -> None:
        self._writer = writer
        self._book = book
        self._snapshot = snapshot
        self._concurrency = concurrency
        self._written: dict[str, Nomination] = {}
        self._signal = threading.Event()
        self._lock = threading.Lock()  # one reconcile at a time: ``_written`` is its state

    def wake(self) -> None:
        """A reservation was made or ended: reconcile now rather than at the next interval."""
        self._signal.set()

    def run(self, stop: threading.Event, interval: float) -> None:
        """Reconcile on every ``wake`` and at least every ``interval`` seconds until ``stop``."""
        while not stop.is_set():
            self._signal.wait(interval)
            self._signal.clear()
            if stop.is_set():
                return
            try:
                self.reconcile()
            except Exception:  # one bad object must not end nominations for good
                log.exception("could not write nominations")

    def reconcile(self) -> int:
        """Write what changed since the last reconcile; return how many writes landed."""
        with self._lock:
            snapshot = self._snapshot()
            wanted = nominations(self._book(), snapshot)
            todo = changes(wanted, self._written, snapshot)
            for uid in [u for u in self._written if _settled(snapshot, u)]:
                del self._written[uid]
            if not todo:
                return 0
            with ThreadPoolExecutor(min(self._concurrency, len(todo))) as pool:
                landed = list(pool.map(self._write, todo))
            for nomination, ok in zip(todo, landed, strict=True):
                if not ok:
                    continue  # tried again next time; a pod gone is dropped then (``_settled``)
                if nomination.node is None:
                    self._written.pop(nomination.uid, None)
                else:
                    self._written[nomination.uid] = nomination
            log.debug("nominations: %d written of %d", sum(landed), len(todo))
            return sum(landed)

    def _write(self, nomination: Nomination) -> bool:
        try:
            return self._writer.nominate(
                nomination.namespace, nomination.name, nomination.uid, nomination.node
            )
        except KubeError as exc:
            log.info(
                "could not nominate %s for %s/%s: %s",
                nomination.node,
                nomination.namespace,
                nomination.name,
                exc,
            )
            return False


def _settled(snapshot: ClusterSnapshot, uid: str) -> bool:
    """Whether the pod is bound or gone: its nomination is no longer phalanx's to keep or clear."""
    pod = snapshot.pod_by_uid(uid)
    return pod is None or pod.node_name is not None or pod.terminating
