"""Prioritize by bin-packing GPUs: fill busy nodes first, keep whole nodes free for big jobs.

Scores are integers 0..10 (``MaxExtenderPriority``); kube-scheduler multiplies them by the extender's
weight and by 10 and adds them to its in-tree scores (extender-protocol.md §2.5). A float or an
out-of-range score would be dropped or distort the sum, so this module only ever returns ``int``.
"""

from __future__ import annotations

from collections.abc import Sequence

from scheduling.gpu_usage import FreeGpus
from scheduling.model import Node, Pod
from scheduling.promises import PromiseBook
from scheduling.snapshot import ClusterSnapshot

MAX_SCORE = 10
"""``MaxExtenderPriority`` in ``k8s.io/kube-scheduler/extender/v1``."""


def binpack_scores(
    pod: Pod, candidates: Sequence[str], snapshot: ClusterSnapshot, promises: PromiseBook
) -> tuple[tuple[str, int], ...]:
    """Score each candidate by how full its GPUs would be after placing ``pod``.

    A GPU pod scores ``10 * used_after / total`` (rounded down), so a node that the pod completes scores
    10 and an empty node scores least. A pod without GPUs scores 10 on nodes without GPUs and at most 9
    on GPU nodes, fuller ones higher, so CPU-only pods keep away from idle GPUs. Unknown nodes and nodes
    the pod does not fit score 0.

    Returns:
        ``(node, score)`` for every distinct candidate, in request order.

    >>> from scheduling.model import Node, Resources
    >>> from types import MappingProxyType
    >>> snap = ClusterSnapshot(MappingProxyType({"a": Node("a", Resources(gpus=8))}))
    >>> binpack_scores(Pod("u", "ns", "p", Resources(gpus=4)), ["a", "zz"], snap, PromiseBook())
    (('a', 5), ('zz', 0))
    """
    need = pod.requests.gpus
    scores: list[tuple[str, int]] = []
    seen: set[str] = set()
    for name in candidates:
        if name in seen:
            continue
        seen.add(name)
        scores.append((name, _score(name, need, snapshot, promises)))
    return tuple(scores)


def _score(name: str, need: int, snapshot: ClusterSnapshot, promises: PromiseBook) -> int:
    node = snapshot.nodes.get(name)
    free = snapshot.free_on(name, promises)
    if node is None or free is None:
        return 0
    return packing_score(node, free, need)


def packing_score(node: Node, free: FreeGpus, need: int) -> int:
    """The packing score of placing a pod that needs ``need`` GPUs on ``node`` with ``free`` GPUs free."""
    total = node.gpu_total
    if total == 0:
        return MAX_SCORE if need == 0 else 0
    if free.count < need:
        return 0
    used_after = total - free.count + need
    if need == 0:
        return ((MAX_SCORE - 1) * used_after) // total
    return (MAX_SCORE * used_after) // total
