"""The elastic pool: which nodes carry the pin taint, and which waiting pods may use those nodes anyway.

Nodes labelled ``phalanx.io/elastic-pool=true`` carry the taint ``phalanx.io/hostname=<node>`` (effect
``--pin-taint-effect``) and only they do: a node that loses the label loses the taint. The taint is
there to pin managed workers (each gets the toleration of its planned node), not to keep phalanx's other
pods (launchers, other gangs) off the pool: those get a toleration ``phalanx.io/hostname`` ``Exists``
while they wait (a toleration may be added to a pending pod; kube-scheduler retries it on the change).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence, Set

from kubeio.errors import KubeError
from kubeio.ports import Pinner as Pinner  # re-exported: placement.elastic_pass imports it from here
from scheduling.cluster.snapshot import ClusterSnapshot
from scheduling.model import SCHEDULER_NAME, Pod

log = logging.getLogger(__name__)

POOL_LABEL = "phalanx.io/elastic-pool"
"""Node label (value ``true``) that puts a node in the managed pool."""


def keep_taints(pins: Pinner, snapshot: ClusterSnapshot) -> tuple[str, ...]:
    """Put the pin taint on every node labelled into the pool, take it off every other; the nodes changed."""
    changed = []
    for name, node in sorted(snapshot.nodes.items()):
        wanted = node.labels.get(POOL_LABEL) == "true"
        if wanted == node.pin_taint:
            continue
        try:
            if pins.taint_node(name, present=wanted):
                changed.append(name)
        except KubeError as exc:
            log.warning("node %s: pin taint not %s: %s", name, "set" if wanted else "removed", exc)
    return tuple(changed)


def open_pool(
    pins: Pinner, snapshot: ClusterSnapshot, pods: Sequence[Pod], workers: Set[str]
) -> tuple[str, ...]:
    """Open the pool to every waiting phalanx pod that is not one of the managed ``workers`` (UIDs)."""
    if not any(node.pin_taint for node in snapshot.nodes.values()):
        return ()
    opened = []
    for pod in pods:
        if (
            pod.scheduler_name != SCHEDULER_NAME
            or pod.node_name is not None
            or pod.terminating
            or pod.tolerates_pool
            or pod.pinned
            or pod.uid in workers
        ):
            continue
        try:
            if pins.open_pool(pod.namespace, pod.name, pod.uid):
                opened.append(pod.key)
        except KubeError as exc:
            log.info("%s: pool toleration not written (%s); next pass tries again", pod.key, exc)
    return tuple(opened)
