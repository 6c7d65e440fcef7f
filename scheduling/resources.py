"""Arithmetic on ``scheduling.model.Resources``, the room a node has left, and how amounts read.

Fair share, admission and reclaim work resource by resource (``nvidia.com/gpu``, ``cpu``, ``memory``)
and talk about one resource at a time in their messages ("over its GPU limit"); filter, the gang
planner and the queues' free capacity all ask what a node has left. This module is the one place that
knows the three names, adds and compares amounts, computes a node's room (``node_left``,
``fits_left``, ``node_room``), and writes an amount the way ``kubectl`` would (``8``, ``1500m``,
``16Gi``), so every decision counts alike and every message reads alike.

One rule for room: what a node has left is its allocatable less what live pods use and what is
promised, per resource. A node that declares no CPU or memory (allocatable 0, as simulated and some
device-only nodes do) is not constrained by it when a pod is placed; in the queues' capacity it adds
nothing. A node that is cordoned or not ready has no room at all.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from scheduling.model import GPU_RESOURCE, Node, Resources
from scheduling.quantity import BINARY_SUFFIXES

GPU = GPU_RESOURCE
"""``nvidia.com/gpu``: whole devices."""

CPU = "cpu"
"""``cpu``: milli-cores in the core's integers."""

MEMORY = "memory"
"""``memory``: bytes."""

RESOURCE_NAMES: tuple[str, ...] = (GPU, CPU, MEMORY)
"""The resources queues divide, in the order messages mention them (GPUs are what users queue for)."""

ZERO = Resources()

_LABELS = {GPU: "GPU", CPU: "CPU", MEMORY: "memory"}
_LARGEST_FIRST = tuple(sorted(BINARY_SUFFIXES.items(), key=lambda item: -item[1]))


def _check(resource: str) -> None:
    if resource not in _LABELS:
        msg = f"unknown resource {resource!r}; queues divide {', '.join(RESOURCE_NAMES)}"
        raise ValueError(msg)


def amount(resources: Resources, resource: str) -> int:
    """Return the integer amount of one resource (GPUs, milli-CPU or bytes).

    >>> amount(Resources(milli_cpu=500, gpus=2), "nvidia.com/gpu")
    2
    """
    _check(resource)
    if resource == GPU:
        return resources.gpus
    if resource == CPU:
        return resources.milli_cpu
    return resources.memory


def resources_of(amounts: Mapping[str, int]) -> Resources:
    """Build ``Resources`` from per-resource amounts; missing resources are zero.

    >>> resources_of({"nvidia.com/gpu": 8})
    Resources(milli_cpu=0, memory=0, gpus=8)
    """
    for name in amounts:
        _check(name)
    return Resources(milli_cpu=amounts.get(CPU, 0), memory=amounts.get(MEMORY, 0), gpus=amounts.get(GPU, 0))


def plus(a: Resources, b: Resources) -> Resources:
    """Return ``a + b`` per resource."""
    return Resources(a.milli_cpu + b.milli_cpu, a.memory + b.memory, a.gpus + b.gpus)


def minus(a: Resources, b: Resources) -> Resources:
    """Return ``a - b`` per resource (may be negative; callers clamp where that means something)."""
    return Resources(a.milli_cpu - b.milli_cpu, a.memory - b.memory, a.gpus - b.gpus)


def total(items: Iterable[Resources]) -> Resources:
    """Return the sum of ``items`` (zero for none)."""
    result = ZERO
    for item in items:
        result = plus(result, item)
    return result


def shortfall(needed: Resources, available: Resources) -> Resources:
    """Return what ``needed`` lacks in ``available``, per resource, never negative.

    >>> shortfall(Resources(gpus=8, milli_cpu=100), Resources(gpus=3, milli_cpu=900))
    Resources(milli_cpu=0, memory=0, gpus=5)
    """
    return Resources(
        max(0, needed.milli_cpu - available.milli_cpu),
        max(0, needed.memory - available.memory),
        max(0, needed.gpus - available.gpus),
    )


def within(a: Resources, b: Resources) -> bool:
    """Whether ``a <= b`` on every resource."""
    return a.milli_cpu <= b.milli_cpu and a.memory <= b.memory and a.gpus <= b.gpus


def is_zero(a: Resources) -> bool:
    """Whether every resource is zero (or less)."""
    return a.milli_cpu <= 0 and a.memory <= 0 and a.gpus <= 0


def resource_label(resource: str) -> str:
    """The word messages use for a resource: ``GPU``, ``CPU`` or ``memory``."""
    _check(resource)
    return _LABELS[resource]


def format_amount(resource: str, value: int) -> str:
    """Write an amount as ``kubectl`` would: GPUs as a count, CPU in cores or ``m``, memory in ``Gi``.

    >>> format_amount("nvidia.com/gpu", 8), format_amount("cpu", 1500), format_amount("cpu", 4000)
    ('8', '1500m', '4')
    >>> format_amount("memory", 16 * 2**30), format_amount("memory", 1000)
    ('16Gi', '1000')
    """
    _check(resource)
    if resource == CPU:
        return str(value // 1000) if value % 1000 == 0 else f"{value}m"
    if resource == MEMORY and value:
        for suffix, unit in _LARGEST_FIRST:
            if value % unit == 0:
                return f"{value // unit}{suffix}"
    return str(value)


def format_quantity(resource: str, value: int) -> str:
    """Write an amount with its resource: ``8 GPUs``, ``1 GPU``, ``1500m CPU``, ``16Gi memory``.

    >>> format_quantity("nvidia.com/gpu", 1), format_quantity("nvidia.com/gpu", 8)
    ('1 GPU', '8 GPUs')
    """
    text = format_amount(resource, value)
    if resource == GPU:
        return f"{text} GPU" if value == 1 else f"{text} GPUs"
    return f"{text} {resource_label(resource)}"


def node_left(node: Node, used: Resources, promised: Resources = ZERO) -> Resources:
    """What ``node`` has left after ``used`` and ``promised``, per resource (negative when overbooked).

    GPUs count the node's usable GPUs (``Node.gpu_total``), not the raw allocatable.
    """
    alloc = node.allocatable
    return Resources(
        alloc.milli_cpu - used.milli_cpu - promised.milli_cpu,
        alloc.memory - used.memory - promised.memory,
        node.gpu_total - used.gpus - promised.gpus,
    )


def fits_left(node: Node, left: Resources, need: Resources) -> bool:
    """Whether ``need``'s CPU and memory fit ``left`` on ``node`` (undeclared resources do not constrain).

    >>> node = Node("n", Resources(milli_cpu=1000, gpus=8))
    >>> fits_left(node, Resources(milli_cpu=500), Resources(milli_cpu=600, memory=2**40))
    False
    >>> fits_left(node, Resources(milli_cpu=600), Resources(milli_cpu=600, memory=2**40))
    True
    """
    alloc = node.allocatable
    if alloc.milli_cpu and need.milli_cpu > left.milli_cpu:
        return False
    return not alloc.memory or need.memory <= left.memory


def node_room(node: Node, used: Resources, promised: Resources = ZERO) -> Resources:
    """What ``node`` adds to the free capacity queues divide: ``node_left``, never negative.

    A cordoned, not-ready or refused node adds nothing.
    """
    if not node.takes_pods:
        return ZERO
    left = node_left(node, used, promised)
    return Resources(max(0, left.milli_cpu), max(0, left.memory), max(0, left.gpus))
