"""Which gang members kube-scheduler should try on their reserved node first (``status.nominatedNodeName``).

kube-scheduler v1.36 tries a pod's nominated node before any other (``schedulePod``: "This node is
likely the only candidate that will fit the pod, and hence we try it first"): its Filter plugins run on
that one node and the extenders are asked about that one name; when it passes, no other node is looked
at. Since v1.35 (``NominatedNodeNameForExpectation``, beta and on by default, KEP-5278) components other
than kube-scheduler may set the field to say where a pod is expected to go. A gang member's node is
known from the moment its gang is reserved (``scheduling.gang.filter``), so without a nomination every
later member paid a Filter pass over every node and an extender call carrying every node's name, only
to be answered with the node it was promised (docs/design/gang-scheduling.md §1).

A nomination also tells kube-scheduler what phalanx already enforces: a nominated pod counts on its node
for every pod of its priority or lower, so the gang's room is held in both schedulers' views.

Who is nominated where (``nominations``):

- a member promised a place (the reservation) and not bound: that place's node;
- a member created after the reservation was made, with no place yet: the node of a stand-in place that
  covers it (``scheduling.gang.stand_in.covers``), members by name matched to places by node then UID,
  each place to one member. Its filter, asked about that one node, adopts a place there
  (``scheduling.gang.stand_in.adopt``).

``changes`` is what to write given what was written before: the new and moved nominations, and a clear
for each pod nominated earlier that is still unbound but no longer promised anything (its reservation
lapsed or was released), since a stale nomination would keep counting the pod on a node it will not get.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from scheduling.cluster.promises import Promise, PromiseBook
from scheduling.cluster.snapshot import ClusterSnapshot
from scheduling.gang.gang_planner import unplaced
from scheduling.gang.stand_in import covers, is_stand_in
from scheduling.model import Pod


@dataclass(frozen=True, slots=True, order=True)
class Nomination:
    """The node one pod should be tried on first, or ``None`` to clear an earlier nomination.

    Attributes:
        namespace: the pod's namespace.
        name: the pod's name.
        uid: the pod's UID (the write must not reach a pod re-created under the same name).
        node: the nominated node, or ``None``.
    """

    namespace: str
    name: str
    uid: str
    node: str | None


def nominations(book: PromiseBook, snapshot: ClusterSnapshot) -> dict[str, Nomination]:
    """Every unbound gang member's nomination, by pod UID (see the module docstring)."""
    wanted: dict[str, Nomination] = {}
    places: dict[str, list[Promise]] = {}
    for uid in sorted(book.by_uid):
        promise = book.by_uid[uid]
        if promise.group is None:
            continue  # a pod on its own is promised only while kube-scheduler binds it
        if is_stand_in(uid):
            places.setdefault(promise.group, []).append(promise)
            continue
        pod = snapshot.pod_by_uid(uid)
        if pod is not None and pod.node_name is None and not pod.terminating:
            wanted[uid] = _nominate(pod, promise.node)
    for group in sorted(places):
        free = sorted(places[group], key=lambda p: (p.node, p.pod_uid))
        for pod in unplaced(snapshot.members(group)):
            if pod.uid in book.by_uid:
                continue
            place = next((p for p in free if covers(p, pod)), None)
            if place is not None:
                free.remove(place)
                wanted[pod.uid] = _nominate(pod, place.node)
    return wanted


def changes(
    wanted: Mapping[str, Nomination], written: Mapping[str, Nomination], snapshot: ClusterSnapshot
) -> tuple[Nomination, ...]:
    """The writes that bring what was ``written`` to what is ``wanted``, by pod key.

    A pod the cache already shows nominated there needs no write (the release pass nominated it as it
    let its gang through). A pod written earlier and not wanted now is cleared only while it waits: a
    bound pod's nomination is kube-scheduler's to clear, and a deleted pod has none.
    """
    out = [n for uid, n in wanted.items() if written.get(uid) != n and not _shows(snapshot, n)]
    for uid, was in written.items():
        if uid in wanted or was.node is None:
            continue
        pod = snapshot.pod_by_uid(uid)
        if pod is not None and pod.node_name is None and not pod.terminating:
            out.append(Nomination(was.namespace, was.name, uid, None))
    return tuple(sorted(out))


def _shows(snapshot: ClusterSnapshot, nomination: Nomination) -> bool:
    """Whether the cache already shows the pod nominated to that node."""
    pod = snapshot.pod_by_uid(nomination.uid)
    return pod is not None and pod.nominated_node == nomination.node


def _nominate(pod: Pod, node: str) -> Nomination:
    return Nomination(pod.namespace, pod.name, pod.uid, node)
