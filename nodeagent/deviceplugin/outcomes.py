"""What the device plugin reports about its answers: a metric for each, and events where it matters.

A guessed preference (several pods could be in admission and the kubelet named none) gets a Warning
event on the pod it answered for; an ``Allocate`` of other GPUs than preferred is logged as a warning and
counted; every ``Allocate`` wakes the truth keeper, which reads what each container got within about a
second and repairs the annotation if it differs.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping

from kubeio.events import ObjectRef
from kubeio.node_pods import NodePod
from kubeio.ports import EventQueue
from nodeagent.node_metrics import NodeMetrics
from scheduling.devices.claims import Basis, Preference


class PluginOutcomes:
    """The plugin's :class:`~nodeagent.deviceplugin.plugin.Outcomes`."""

    def __init__(
        self,
        metrics: NodeMetrics,
        recorder: EventQueue,
        pods: Callable[[], Mapping[str, NodePod]],
        poke: Callable[[], None],
        *,
        log: logging.Logger | None = None,
    ) -> None:
        self._metrics = metrics
        self._recorder = recorder
        self._pods = pods
        self._poke = poke
        self._log = log or logging.getLogger(__name__)

    def preferred(self, preference: Preference) -> None:
        """Count it; a guess gets an event on the pod it answered for."""
        self._metrics.preferred(preference)
        if preference.basis is not Basis.GUESSED or preference.pod is None:
            return
        pod = self._pods().get(preference.pod)
        if pod is None:
            return
        others = ", ".join(p for p in preference.contenders if p != preference.pod)
        message = (
            f"the kubelet admitted one of pods {preference.pod}, {others} and could not tell which; "
            f"phalanx's device plugin answered with this pod's GPUs {list(preference.gpus)}, and the node "
            "agent checks what each container got (the annotation follows the truth)"
        )
        ref = ObjectRef("Pod", "v1", pod.namespace, pod.name, pod.uid)
        self._recorder.record(ref, "Warning", "GPUsGuessed", message)

    def allocated(self, gpus: tuple[int, ...], preference: Preference | None) -> None:
        """Count it and wake the truth keeper."""
        if preference is None:
            outcome = "unasked"
        elif set(gpus) == set(preference.gpus):
            outcome = "as_preferred"
        else:
            outcome = "deviated"
            self._log.warning(
                "the kubelet allocated GPUs %s where the plugin preferred %s for %s",
                list(gpus),
                list(preference.gpus),
                preference.pod or "a pod phalanx did not place",
            )
        self._metrics.allocated(outcome)
        self._poke()
