"""Per-resource arithmetic on ``scheduling.model.Resources`` for queue decisions, and how amounts read.

Fair share, admission and reclaim all work resource by resource (``nvidia.com/gpu``, ``cpu``,
``memory``) and talk about one resource at a time in their messages ("over its GPU limit"). This module
gives them one place that knows the three names, adds and compares amounts, and writes an amount the
way ``kubectl`` would (``8``, ``1500m``, ``16Gi``), so every message reads alike.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from scheduling.model import GPU_RESOURCE, Resources

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
_BINARY = (("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10))


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
        for suffix, unit in _BINARY:
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
