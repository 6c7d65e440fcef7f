"""Publish a topology document as the node's ``phalanx.io/gpu-topology`` annotation, only when it changed.

Every agent re-reads its topology every minute, and in a large cluster thousands of unchanged writes per
minute would wake every Node watcher (kube-scheduler, the extender, kubelet's own informers) for
nothing. So the publisher first reads the annotation the node carries and patches only when the JSON
text differs. Reading the node, not a remembered last value, also repairs an annotation that someone
else edited or removed.
"""

from __future__ import annotations

import enum
import logging

from kubeio.ports import AnnotationStore
from scheduling.model import TOPOLOGY_ANNOTATION
from scheduling.topology import TopologyDocument


class PublishOutcome(enum.Enum):
    """What one publish did."""

    PATCHED = "patched"
    """The node carried another value (or none); it now carries the document."""
    UNCHANGED = "unchanged"
    """The node already carried exactly this JSON; nothing was written."""


class TopologyPublisher:
    """Keeps one node's topology annotation equal to the latest document."""

    def __init__(
        self,
        store: AnnotationStore,
        node: str,
        *,
        key: str = TOPOLOGY_ANNOTATION,
        log: logging.Logger | None = None,
    ) -> None:
        self._store = store
        self._node = node
        self._key = key
        self._log = log or logging.getLogger(__name__)

    @property
    def node(self) -> str:
        """The node this publisher writes to."""
        return self._node

    def publish(self, document: TopologyDocument) -> PublishOutcome:
        """Make the node's annotation equal ``document.to_json()``, writing only if it differs.

        Raises:
            KubeError: reading or patching the node failed (the caller retries later).
        """
        text = document.to_json()
        current = self._store.get(self._node, self._key)
        if current == text:
            self._log.debug("node %s already has this topology (%d GPUs)", self._node, document.gpu_count)
            return PublishOutcome.UNCHANGED
        version = self._store.patch(self._node, self._key, text)
        nvlink_pairs = sum(1 for link in document.links if link.nvlinks)
        self._log.info(
            "published the topology of node %s: %d GPUs, %s (%s; resourceVersion %s)",
            self._node,
            document.gpu_count,
            "NVSwitch" if document.nvswitch else f"{nvlink_pairs} NVLink pairs",
            "first publish" if current is None else "changed",
            version,
        )
        return PublishOutcome.PATCHED
