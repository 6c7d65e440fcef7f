"""The pods that wait, grouped: kept from one gate decision to the next from the pod change log.

Every gate decision (the admission door's at each pod's creation, and each release pass) reads the
unbound pods of the queues: the gated ones by group, and the groups released and not bound yet (in
flight) with what they need together and where their plans put them. Grouping, sorting and summing
those per decision made one door decision cost O(pods in flight): about 10 ms with 3,000 in flight at
1,000 nodes against 0.3 ms with none (docs/design/framework-sidecar.md, "What the gate costs").
Between two decisions only a few pods change, so a ``PodLedger`` keeps the groups, each released
group's sums, the sums of all of them per queue label, and the released pods by planned node, and
given a newer snapshot looks again only at the pods the state's pod change log names
(``ClusterSnapshot.pod_changes``; without it, or when it no longer covers the span, at every pod whose
object changed: pods are immutable values, so that is one identity check each).

Pods the caller knows of and the cache has not seen yet (``ClusterSnapshot.arrivals``: let in at the
door a moment ago) are laid over one decision's answer and never kept, so the ledger's own state is
always the cache's.

Not thread-safe: a statement chain's caller holds one lock.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from scheduling.cluster.change_log import ChangeLog
from scheduling.cluster.snapshot import ClusterSnapshot
from scheduling.model import QUEUE_LABEL, SCHEDULER_NAME, Pod, group_key

Sums = tuple[int, int, int]
"""Milli-CPU, memory and GPUs requested together."""

LabelSums = tuple[int, int, int, int]
"""Milli-CPU, memory and GPUs requested together, and by how many groups."""


def is_released(pod: Pod) -> bool:
    """Whether an unbound pod of the queues is released: phalanx's and no longer gated."""
    return pod.scheduler_name == SCHEDULER_NAME and not pod.gated and pod.node_name is None


@dataclass(frozen=True, slots=True)
class Flight:
    """One released group not bound yet: its pods (by key) and what they request together.

    Attributes:
        label: the queue label of its first pod (a group is charged where its first pod says).
        stamped: its first pod's quota is Kueue's by its own label (``Pod.quota_by_kueue``).
        unplanned: a pod of it carries no plan.
    """

    pods: tuple[Pod, ...]
    sums: Sums
    label: str | None
    stamped: bool
    unplanned: bool

    @staticmethod
    def of(pods: Iterable[Pod]) -> Flight:
        """The group of ``pods``."""
        ordered = tuple(sorted(pods, key=_by_key))
        cpu = memory = gpus = 0
        unplanned = False
        for pod in ordered:
            need = pod.requests
            cpu, memory, gpus = cpu + need.milli_cpu, memory + need.memory, gpus + need.gpus
            unplanned = unplanned or pod.plan is None
        first = ordered[0]
        return Flight(
            ordered, (cpu, memory, gpus), first.labels.get(QUEUE_LABEL), first.quota_by_kueue, unplanned
        )


@dataclass(frozen=True, slots=True)
class Waiting:
    """The unbound pods of the queues as one decision reads them (read-only; valid until the next look).

    Attributes:
        gated: group key -> its gated pods, by key.
        released: group key -> the group released and not bound yet.
        by_label: the released groups not stamped by Kueue, their sums added per queue label, with
            how many groups each.
        members: the released groups' pods, counted.
        gpus: the released groups' GPUs, summed.
        planned: node -> the released pods whose plan names it, by key.
        unschedulable: pod key -> the released pods kube-scheduler last turned down (``Pod.unschedulable``).
        unplanned: the released groups with a pod that carries no plan.
    """

    gated: Mapping[str, tuple[Pod, ...]]
    released: Mapping[str, Flight]
    by_label: Mapping[str | None, LabelSums]
    members: int
    gpus: int
    planned: Mapping[str, tuple[Pod, ...]]
    unschedulable: Mapping[str, Pod]
    unplanned: frozenset[str]


class PodLedger:
    """The unbound pods of the queues grouped, kept across snapshots (see the module docstring)."""

    def __init__(self) -> None:
        self._pods: dict[str, Pod] = {}  # uid -> the unbound queue pod as last seen
        self._gated: dict[str, dict[str, Pod]] = {}  # group -> uid -> pod
        self._released: dict[str, dict[str, Pod]] = {}
        self._planned: dict[str, dict[str, Pod]] = {}  # node -> uid -> released pod planned there
        self._unschedulable: dict[str, Pod] = {}  # pod key -> released pod turned down
        self._gated_out: dict[str, tuple[Pod, ...]] = {}
        self._flights: dict[str, Flight] = {}
        self._planned_out: dict[str, tuple[Pod, ...]] = {}
        self._unplanned: set[str] = set()
        self._totals = FlightTotals()
        self._log: ChangeLog | None = None
        self._version = -1
        self.recounts = 0
        """How many times every pod was looked at (the first look, a log that did not cover the span)."""

    def look(self, snapshot: ClusterSnapshot) -> Waiting:
        """The unbound pods of ``snapshot`` grouped, looking again only at the pods changed since the last."""
        arriving = frozenset(p.uid for p in snapshot.arrivals)
        current = snapshot.unbound_pods
        log = snapshot.pod_changes
        if current is None:  # a snapshot without the kept index (built from lists): every pod is looked at
            current = {p.uid: p for p in snapshot.unbound_queue_pods()}
            log = None
        self._catch_up(log, snapshot.version, current, arriving)
        waiting = Waiting(
            MappingProxyType(self._gated_out),
            MappingProxyType(self._flights),
            self._totals.by_label(),
            self._totals.members,
            self._totals.gpus,
            MappingProxyType(self._planned_out),
            MappingProxyType(self._unschedulable),
            frozenset(self._unplanned),
        )
        return _laid_over(waiting, snapshot.arrivals) if snapshot.arrivals else waiting

    def _catch_up(
        self, log: ChangeLog | None, version: int, current: Mapping[str, Pod], arriving: frozenset[str]
    ) -> None:
        """Bring the groups to ``current`` less the arrivals, by the log when it covers the span."""
        names = None
        if log is not None and log is self._log and self._version <= version:
            names = log.since(self._version, version)
        self._log, self._version = log, version
        if names is None:
            self.recounts += 1
            names = frozenset(u for u, p in current.items() if self._pods.get(u) is not p)
            names |= frozenset(u for u in self._pods if u not in current)
        touched: set[str] = set()
        nodes: set[str] = set()
        for uid in sorted(names - arriving):
            pod = current.get(uid)
            old = self._pods.get(uid)
            if old is pod:
                continue
            if old is not None:
                self._drop(uid, old, touched, nodes)
            if pod is not None:
                self._add(uid, pod, touched, nodes)
        for key in sorted(touched):
            self._refresh(key)
        for node in sorted(nodes):
            on = self._planned.get(node)
            if on:
                self._planned_out[node] = tuple(sorted(on.values(), key=_by_key))
            else:
                self._planned.pop(node, None)
                self._planned_out.pop(node, None)

    def _drop(self, uid: str, pod: Pod, touched: set[str], nodes: set[str]) -> None:
        del self._pods[uid]
        key = group_key(pod)
        touched.add(key)
        if is_released(pod):
            _pop(self._released, key, uid)
            if pod.plan is not None:
                _pop(self._planned, pod.plan[0], uid)
                nodes.add(pod.plan[0])
            if self._unschedulable.get(pod.key) is pod:  # not a newer pod of that name, added first
                del self._unschedulable[pod.key]
        elif pod.gated:
            _pop(self._gated, key, uid)

    def _add(self, uid: str, pod: Pod, touched: set[str], nodes: set[str]) -> None:
        self._pods[uid] = pod
        key = group_key(pod)
        touched.add(key)
        if is_released(pod):
            self._released.setdefault(key, {})[uid] = pod
            if pod.plan is not None:
                self._planned.setdefault(pod.plan[0], {})[uid] = pod
                nodes.add(pod.plan[0])
            if pod.unschedulable:
                self._unschedulable[pod.key] = pod
        elif pod.gated:
            self._gated.setdefault(key, {})[uid] = pod

    def _refresh(self, key: str) -> None:
        """Figure group ``key`` again: its gated pods, its flight, and the flights' sums."""
        gated = self._gated.get(key)
        if gated:
            self._gated_out[key] = tuple(sorted(gated.values(), key=_by_key))
        else:
            self._gated_out.pop(key, None)
        old = self._flights.pop(key, None)
        if old is not None:
            self._totals.charge(old, -1)
        self._unplanned.discard(key)
        pods = self._released.get(key)
        if pods:
            flight = self._flights[key] = Flight.of(pods.values())
            self._totals.charge(flight, 1)
            if flight.unplanned:
                self._unplanned.add(key)


class FlightTotals:
    """Released groups added up: how many, their pods and GPUs, and their sums per queue label.

    Groups stamped by Kueue count in everything but the labels' sums (they charge no queue of
    phalanx's). The ledger keeps one over every released group; a decision copies it (``of``) and
    takes out the groups that do not count whole (``scheduling.admission.walk.count_in_flight``).
    """

    def __init__(
        self,
        groups: int = 0,
        members: int = 0,
        gpus: int = 0,
        labels: dict[str | None, list[int]] | None = None,
    ) -> None:
        self.groups = groups
        self.members = members
        self.gpus = gpus
        self._labels = labels if labels is not None else {}  # label -> [cpu, memory, gpus, groups]

    @staticmethod
    def of(waiting: Waiting) -> FlightTotals:
        """The totals of ``waiting``'s released groups, as an independent copy."""
        labels = {label: list(sums) for label, sums in waiting.by_label.items()}
        return FlightTotals(len(waiting.released), waiting.members, waiting.gpus, labels)

    def charge(self, flight: Flight, sign: int) -> None:
        """Add (``sign`` 1) or take away (-1) ``flight``."""
        self.groups += sign
        self.members += sign * len(flight.pods)
        self.gpus += sign * flight.sums[2]
        if not flight.stamped:
            self.charge_queue(flight, sign)

    def charge_queue(self, flight: Flight, sign: int) -> None:
        """Add ``flight`` to (or take it off) its queue label's sums only; a label with no group goes."""
        summed = self._labels.setdefault(flight.label, [0, 0, 0, 0])
        cpu, memory, gpus = flight.sums
        summed[0] += sign * cpu
        summed[1] += sign * memory
        summed[2] += sign * gpus
        summed[3] += sign
        if not summed[3]:
            del self._labels[flight.label]

    def by_label(self) -> Mapping[str | None, LabelSums]:
        """The sums per label, with how many groups each."""
        return MappingProxyType({label: (s[0], s[1], s[2], s[3]) for label, s in self._labels.items()})


def _laid_over(waiting: Waiting, arrivals: Iterable[Pod]) -> Waiting:
    """``waiting`` with ``arrivals`` added (unbound pods the cache has not seen yet), for one decision."""
    gated = dict(waiting.gated)
    flights = dict(waiting.released)
    planned = dict(waiting.planned)
    unschedulable = dict(waiting.unschedulable)
    unplanned = set(waiting.unplanned)
    totals = FlightTotals.of(waiting)
    for pod in sorted(arrivals, key=_by_key):
        key = group_key(pod)
        if is_released(pod):
            old = flights.get(key)
            if old is not None:
                totals.charge(old, -1)
            flights[key] = Flight.of([*(old.pods if old else ()), pod])
            totals.charge(flights[key], 1)
            if flights[key].unplanned:
                unplanned.add(key)
            if pod.plan is not None:
                planned[pod.plan[0]] = tuple(sorted((*planned.get(pod.plan[0], ()), pod), key=_by_key))
            if pod.unschedulable:
                unschedulable[pod.key] = pod
        elif pod.gated:
            gated[key] = tuple(sorted((*gated.get(key, ()), pod), key=_by_key))
    return Waiting(
        gated,
        flights,
        totals.by_label(),
        totals.members,
        totals.gpus,
        planned,
        unschedulable,
        frozenset(unplanned),
    )


def _pop(index: dict[str, dict[str, Pod]], key: str, uid: str) -> None:
    """Take ``uid`` out of ``index[key]``, and the entry out when it empties."""
    inner = index.get(key)
    if inner is not None:
        inner.pop(uid, None)
        if not inner:
            del index[key]


def _by_key(pod: Pod) -> str:
    return pod.key
