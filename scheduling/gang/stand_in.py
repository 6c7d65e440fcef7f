"""Stand-ins: the members of a gang that do not exist yet, planned for so that the ones that do can bind.

Without admission gates, kube-scheduler tries each member of a gang as soon as it is created. A gang
with fewer than ``minMember`` pods was turned down ("waiting for members"), so its first members went
to kube-scheduler's backoff and came back one by one behind every other pending pod: each went through
kube-scheduler's backlog twice, and a big gang bound long after its last member was created.

Instead the gang is planned whole at its first member's filter (docs/design/gang-scheduling.md §1):
each missing member is a *stand-in*, shaped like the gang's largest unbound member (the workers of an
MPIJob or a PyTorchJob are alike), whose place is promised under a stand-in UID like any member's. A
member created later takes a stand-in's place (``adopt``) when kube-scheduler offers its node and the
place covers the member's GPUs, CPU and memory, and waits at the bind barrier with the others. A member
no place covers (a launcher that asks for more CPU than a worker) has the gang planned again from what
exists then. Stand-ins are promises and nothing else: they expire with the reservation, they count
against free capacity as any promise does, and the queue rules count the whole gang (the queue hold
asks for ``minMember`` members' requests), so one tenant's half-created gang takes no more than its
whole gang would.

Only a gang still being created is planned with stand-ins: one whose newest member is younger than a
reservation lasts. A gang whose missing members never come (its controller stopped, a ResourceQuota
refused them) would otherwise take its whole room again at every retry of the members it has, each
time until the bind barrier gives up; such a gang waits as before, turned down with "waiting for
members: 10 of 100 pods exist", and holds nothing.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import replace

from scheduling.cluster.promises import Promise, PromiseBook
from scheduling.gang.gang_planner import unplaced
from scheduling.model import ADMISSION_GATE, Pod, PodGroup
from scheduling.timestamps import seconds

STAND_IN = "stand-in:"
"""Prefix of a stand-in's UID (no API object has a UID of this form)."""


def is_stand_in(uid: str) -> bool:
    """Whether ``uid`` names a stand-in rather than a pod.

    >>> is_stand_in("stand-in:ml/llama/3"), is_stand_in("5d1c7a0e-0c1b-4c5e-9a51-0f6f0d6b2a11")
    (True, False)
    """
    return uid.startswith(STAND_IN)


def being_created(live: Sequence[Pod], wall: float, window: float) -> bool:
    """Whether the gang's newest member was created within ``window`` seconds before ``wall``.

    ``wall`` is seconds since the epoch (the API's timestamps are wall time); 0 means the caller has no
    wall clock (a replay of a decision saved without one), and then every gang counts as being created.

    >>> from scheduling.model import Resources
    >>> pod = Pod("u", "ml", "w0", Resources(), created="2026-01-01T00:00:00Z")
    >>> made = seconds(pod.created)
    >>> being_created([pod], made + 30, 60.0), being_created([pod], made + 90, 60.0)
    (True, False)
    """
    if wall <= 0:
        return True
    times = [t for p in live if (t := seconds(p.created)) is not None]
    return not times or max(times) >= wall - window


def stand_ins(group: PodGroup, live: Sequence[Pod]) -> tuple[Pod, ...]:
    """The members ``group`` still lacks, as copies of its largest unbound live member.

    ``live`` are the gang's pods that are not being deleted. None when the gang has its ``minMember``
    pods, when no member waits to be placed (nothing to shape a stand-in after), or when a waiting member
    carries the admission gate: the release pass lets such a gang through only whole, so what it says
    ("waiting for members") is what the filter would say too.
    """
    missing = group.min_member - len(live)
    waiting = unplaced(live)
    if missing <= 0 or not waiting or any(ADMISSION_GATE in p.gates for p in waiting):
        return ()  # a gated gang reaches kube-scheduler only whole (the release pass): nothing to keep
    model = min(waiting, key=lambda p: (-p.requests.gpus, -p.requests.milli_cpu, -p.requests.memory, p.name))
    return tuple(
        replace(model, uid=f"{STAND_IN}{group.key}/{i}", name=f"{model.name}~{i}", gpu_indices=None)
        for i in range(missing)
    )


def adopt(pod: Pod, group: str, candidates: Collection[str], promises: PromiseBook) -> PromiseBook | None:
    """The book with ``pod`` in one of its gang's stand-in places, or ``None`` when none covers it.

    A place covers the pod when kube-scheduler offers its node (``candidates``), the pod is not pinned
    elsewhere, it holds exactly the GPUs the pod asks for, and its CPU and memory are at least the
    pod's. Of the places that cover it, the first by node, then stand-in UID, so a replay decides the
    same. The place keeps its expiry: it is the gang's reservation, not a new one.
    """
    offered = frozenset(candidates)
    places = sorted(
        (
            p
            for uid in promises.by_group.get(group, frozenset())
            if is_stand_in(uid) and (p := promises.by_uid[uid]).node in offered and covers(p, pod)
        ),
        key=lambda p: (p.node, p.pod_uid),
    )
    if not places:
        return None
    place = places[0]
    taken: Promise = replace(place, pod_uid=pod.uid, pod_key=pod.key, requests=pod.requests)
    return promises.release(place.pod_uid).add(taken)


def covers(place: Promise, pod: Pod) -> bool:
    """Whether the stand-in ``place`` can take ``pod``, wherever kube-scheduler offers it.

    The pod is not pinned elsewhere, the place holds exactly the GPUs it asks for, and at least its CPU
    and memory.
    """
    asks = pod.requests
    return (
        (not pod.pinned or place.node in pod.pinned)
        and len(place.gpus) == asks.gpus
        and place.requests.milli_cpu >= asks.milli_cpu
        and place.requests.memory >= asks.memory
    )


def has_stand_ins(group: str, promises: PromiseBook) -> bool:
    """Whether ``group``'s reservation still has places for members not created yet."""
    return any(is_stand_in(uid) for uid in promises.by_group.get(group, frozenset()))
