"""Which GPU indices a pod gets on the node kube-scheduler chose.

The choice is made at ``bind``, under the extender's lock, from the node's free indices after live pods
and open promises. With a topology document the best-connected free set is taken
(``scheduling.topology.best_gpu_set``: most sustained bandwidth, then one socket, then leaving the best
islands whole, then lowest indices); without one the lowest free indices, which is deterministic too.
"""

from __future__ import annotations

from scheduling.cluster.usage import FreeGpus
from scheduling.model import Node
from scheduling.topology import TopologyCache, best_gpu_set


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


def choose_gpus(node: Node, free: FreeGpus, need: int, cache: TopologyCache) -> tuple[int, ...]:
    """Return the GPU indices to give a pod that needs ``need`` GPUs on ``node``.

    Raises:
        NoGpusError: fewer than ``need`` GPUs are free.
    """
    if need == 0:
        return ()
    if need > free.count:
        msg = f"only {free.count} GPUs free, pod needs {need}"
        raise NoGpusError(msg)
    if node.topology is not None:
        choice = best_gpu_set(node.topology, free.indices, need, cache=cache)
        if choice is not None:
            return choice.gpus
    return lowest_free(free, need)
