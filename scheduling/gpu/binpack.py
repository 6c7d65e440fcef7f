"""Prioritize by bin-packing GPUs: fill busy nodes first, keep whole nodes free for big jobs.

Scores are integers 0..10 (``MaxExtenderPriority``); kube-scheduler multiplies them by the extender's
weight and by 10 and adds them to its in-tree scores (docs/design/extender-protocol.md §2.5). A float or an
out-of-range score would be dropped or distort the sum, so this module only ever returns ``int``.
"""

from __future__ import annotations

from scheduling.cluster.usage import FreeGpus
from scheduling.model import Node

MAX_SCORE = 10
"""``MaxExtenderPriority`` in ``k8s.io/kube-scheduler/extender/v1``."""


def packing_score(node: Node, free: FreeGpus, need: int) -> int:
    """How full ``node``'s GPUs would be after placing a pod that needs ``need`` GPUs, as 0..10.

    A GPU pod scores ``10 * used_after / total`` (rounded down), so a node that the pod completes scores
    10 and an empty node scores least. A pod without GPUs scores 10 on nodes without GPUs and at most 9
    on GPU nodes, fuller ones higher, so CPU-only pods keep away from idle GPUs. A node the pod does not
    fit scores 0.

    >>> from scheduling.model import Resources
    >>> packing_score(Node("a", Resources(gpus=8)), FreeGpus(frozenset(range(8)), 8), 4)
    5
    """
    total = node.gpu_total
    if total == 0:
        return MAX_SCORE if need == 0 else 0
    if free.count < need:
        return 0
    used_after = total - free.count + need
    if need == 0:
        return ((MAX_SCORE - 1) * used_after) // total
    return (MAX_SCORE * used_after) // total
