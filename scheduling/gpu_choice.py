"""Which GPU indices a pod gets on the node kube-scheduler chose.

The choice is made at ``bind``, under the extender's lock, from the node's free indices after live pods
and open promises. Without topology information the lowest free indices are taken, which keeps the
choice deterministic and packs GPUs from index 0 up.
"""

from __future__ import annotations

from scheduling.gpu_usage import FreeGpus


class NoGpusError(ValueError):
    """The node no longer has enough free GPUs for the pod (another bind took them first)."""


def lowest_free(free: FreeGpus, need: int) -> tuple[int, ...]:
    """Return the ``need`` lowest free indices.

    Raises:
        NoGpusError: fewer than ``need`` GPUs are free.

    >>> lowest_free(FreeGpus(frozenset({5, 1, 3}), 3), 2)
    (1, 3)
    """
    if need > free.count:
        msg = f"only {free.count} GPUs free, pod needs {need}"
        raise NoGpusError(msg)
    return tuple(sorted(free.indices)[:need])
