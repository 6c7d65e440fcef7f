"""Which GPUs the device plugin prefers for the container the kubelet is admitting.

The kubelet's device manager asks ``GetPreferredAllocation(available, must_include, size)`` for one
container at a time and names no pod (Kubernetes v1.36, ``pkg/kubelet/cm/devicemanager``). It admits
pods one at a time: its pod admission runs serially, and the pod being admitted is the only active pod
whose GPU containers hold no devices yet. So the plugin answers from the pods bound to its node:

* every pod that may be in admission is a *contender*: a pod phalanx placed (its ``phalanx.io/gpus``
  set, a :class:`DeviceClaim` with GPUs) whose set is still available and has a container of that size,
  or a GPU pod phalanx did not place (no set) with such a container that has no devices yet;
* one contender: that pod's set (or, for a pod phalanx did not place, the driver's topology choice);
* several: the driver asks the kubelet which pod it is admitting (``PodResources.List``: the active
  pod whose GPU containers have no devices) and answers for that pod;
* the kubelet names none of them (or cannot be asked): the earliest bound contender, marked
  :attr:`Basis.GUESSED`, which the driver makes loud (event, metric); what each container really got is
  read back afterwards and the annotation follows it (``scheduling.devices.truth``).

Pure: the driver passes the pods, the kubelet's answer and the fallback choice.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from scheduling.topology import NodeTopology, TopologyCache, best_gpu_set


@dataclass(frozen=True, slots=True)
class DeviceClaim:
    """A GPU pod on this node that the kubelet may be admitting.

    Attributes:
        pod: ``namespace/name``.
        gpus: the indices of its ``phalanx.io/gpus``; empty for a GPU pod phalanx did not place.
        sizes: the GPU counts of its containers that request GPUs, in the kubelet's order (init
            containers first).
        order: its place in the order the pods were bound to the node (the order the kubelet sees them).
    """

    pod: str
    gpus: tuple[int, ...]
    sizes: tuple[int, ...]
    order: int

    @property
    def placed(self) -> bool:
        """Whether phalanx chose its GPUs."""
        return bool(self.gpus)


@dataclass(frozen=True, slots=True)
class AllocationAsk:
    """One container's ``ContainerPreferredAllocationRequest``, in GPU indices."""

    available: frozenset[int]
    must_include: frozenset[int]
    size: int


class Basis(enum.Enum):
    """Why the plugin prefers the set it prefers."""

    PLACED = "placed"
    """Exactly one pod may be in admission and phalanx chose its set."""
    KUBELET = "kubelet"
    """Several pods could be; the kubelet's PodResources named the one it admits."""
    GUESSED = "guessed"
    """Several could be and the kubelet named none of them: the earliest bound, to be checked."""
    UNCLAIMED = "unclaimed"
    """The pod being admitted has no phalanx set: the node's own topology choice."""


@dataclass(frozen=True, slots=True)
class Preference:
    """The answer for one container.

    Attributes:
        gpus: the indices to prefer, sorted; ``size`` of them when the request can be met.
        basis: why.
        pod: the pod the answer is for, when one is known.
        contenders: every pod that could have been in admission, in bind order.
    """

    gpus: tuple[int, ...]
    basis: Basis
    pod: str | None
    contenders: tuple[str, ...]

    def describe(self) -> str:
        """One log line."""
        whom = self.pod or "a pod phalanx did not place"
        others = f" (contenders: {', '.join(self.contenders)})" if len(self.contenders) > 1 else ""
        return f"GPUs {list(self.gpus)} for {whom}: {self.basis.value}{others}"


def contenders(ask: AllocationAsk, claims: Iterable[DeviceClaim]) -> list[DeviceClaim]:
    """The pods that may be the one in admission, in bind order (then by name)."""
    reachable = ask.available | ask.must_include
    found = []
    for claim in claims:
        if ask.size not in claim.sizes:
            continue
        if claim.placed:
            held = set(claim.gpus)
            if not ask.must_include <= held or len(held & reachable) < ask.size:
                continue
        found.append(claim)
    return sorted(found, key=lambda c: (c.order, c.pod))


def prefer(
    ask: AllocationAsk,
    claims: Iterable[DeviceClaim],
    *,
    admitting: frozenset[str] | None,
    fallback: Callable[[AllocationAsk], tuple[int, ...]],
) -> Preference:
    """The set to prefer for ``ask``.

    Args:
        ask: the kubelet's request.
        claims: the GPU pods on the node not known to hold their devices yet.
        admitting: the pods the kubelet lists as active with GPU containers that hold no devices (the
            one it admits), or ``None`` when it was not asked.
        fallback: what to prefer for a pod phalanx did not place (the driver's topology choice); called
            only for such a pod.

    A result marked :attr:`Basis.GUESSED` with ``admitting=None`` means "ask the kubelet and call again".
    """
    found = contenders(ask, claims)
    names = tuple(c.pod for c in found)
    if not found:
        return Preference(_fit(ask, fallback(ask)), Basis.UNCLAIMED, None, names)
    if len(found) == 1:
        return _answer(ask, found[0], Basis.PLACED, fallback, names)
    if admitting is None:
        return _answer(ask, found[0], Basis.GUESSED, fallback, names)
    named = [c for c in found if c.pod in admitting]
    if len(named) == 1:
        return _answer(ask, named[0], Basis.KUBELET, fallback, names)
    if not named and admitting:
        return Preference(_fit(ask, fallback(ask)), Basis.UNCLAIMED, None, names)
    return _answer(ask, (named or found)[0], Basis.GUESSED, fallback, names)


def _answer(
    ask: AllocationAsk,
    claim: DeviceClaim,
    basis: Basis,
    fallback: Callable[[AllocationAsk], tuple[int, ...]],
    names: tuple[str, ...],
) -> Preference:
    if not claim.placed:
        kind = Basis.UNCLAIMED if basis is Basis.PLACED else basis
        return Preference(_fit(ask, fallback(ask)), kind, claim.pod, names)
    return Preference(_fit(ask, claim.gpus), basis, claim.pod, names)


def _fit(ask: AllocationAsk, wanted: Iterable[int]) -> tuple[int, ...]:
    """``must_include`` plus the lowest wanted indices that are available, up to ``size``.

    >>> _fit(AllocationAsk(frozenset({0, 1, 2, 3}), frozenset(), 2), (3, 1))
    (1, 3)
    >>> _fit(AllocationAsk(frozenset({0, 1, 2}), frozenset({5}), 2), (0, 1, 2))
    (0, 5)
    """
    chosen = set(ask.must_include)
    for index in sorted(set(wanted) & ask.available - chosen):
        if len(chosen) >= ask.size:
            break
        chosen.add(index)
    return tuple(sorted(chosen))


def best_available(
    ask: AllocationAsk, topology: NodeTopology | None, cache: TopologyCache | None = None
) -> tuple[int, ...]:
    """The node's own choice for a pod phalanx did not place: the best-connected available set.

    With ``must_include`` (the kubelet reuses an init container's GPUs) or without a topology, the
    lowest available indices complete the set, which is deterministic too.

    >>> best_available(AllocationAsk(frozenset({4, 1, 2}), frozenset(), 2), None)
    (1, 2)
    """
    need = ask.size - len(ask.must_include)
    if need <= 0:
        return tuple(sorted(ask.must_include))
    free = ask.available - ask.must_include
    if topology is not None and not ask.must_include:
        inside = frozenset(i for i in free if 0 <= i < topology.gpu_count)
        choice = best_gpu_set(topology, inside, need, cache=cache) if len(inside) >= need else None
        if choice is not None:
            return choice.gpus
    return tuple(sorted(ask.must_include | set(sorted(free)[:need])))
