"""Pods created around the admission gate: seen, counted and told, whatever let them through.

The gate webhook fails open (``failurePolicy: Ignore``): a wrong ``caBundle``, a placement manager
that is down, a timeout or a refused review all let the pod be created ungated, and kube-scheduler then
tries it outside the queues' fair order. The webhook check (``placement.webhook_watch``) sees only the
first cause; this detector sees the effect. The gate webhook stamps every pod of scheduler ``phalanx``
it answers for (``phalanx.io/gate-webhook``), so such a pod without the stamp was created around the
webhook, whether kube-scheduler has bound it since or not (on an idle cluster it binds an ungated pod
within a fraction of a second). Only pods that the webhook would have been called for count: the gate
configuration exists, selects the pod's namespace, and is older than the pod (a pod created while an
admin had deleted the configuration to turn gating off is no bypass). So that a leader taking over does
not report again what its predecessor reported, only pods created in the last ``LOOKBACK`` seconds
count.

Each such pod, once: a Warning event ``GateBypassed`` on it (so ``kubectl describe pod`` and
``phalanx why`` show it), an ERROR log line and ``phalanx_gate_bypassed_pods_total``; and for
``window`` seconds after the last one the placement manager is not ready (``recent``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime

from kubeio.ports import ClusterSource, EventSink
from kubeio.render import pod_ref
from kubeio.webhook_configs import Webhook, WebhookConfiguration
from scheduling.model import SCHEDULER_NAME, Pod

log = logging.getLogger(__name__)

LOOKBACK = 600.0
"""Pods created longer ago than this (seconds) are not reported: a new leader would report them again."""

Gate = Callable[[], tuple[WebhookConfiguration, Webhook] | None]
"""The registered gate webhook and its configuration (``WebhookWatch.gate``), or ``None``."""


class BypassPass:
    """Finds the pods created around the gate webhook; the leader runs ``check`` every pass."""

    def __init__(
        self,
        source: ClusterSource,
        events: EventSink,
        *,
        gate: Gate,
        clock: Callable[[], float],
        window: float,
        on_bypass: Callable[[], None] = lambda: None,
    ) -> None:
        self._source = source
        self._events = events
        self._gate = gate
        self._clock = clock  # wall clock: compared with creationTimestamps
        self._window = window
        self._on_bypass = on_bypass
        self._seen: set[str] = set()
        self._last: tuple[float, str] | None = None

    def run(self) -> list[Pod]:
        """Report the pods that bypassed the gate and were not reported yet; return them."""
        found = self._gate()
        if found is None:
            self._seen.clear()
            return []
        config, webhook = found
        now = self._clock()
        bypassed = [
            p
            for p in self._source.snapshot().queue_pod_list()
            if p.scheduler_name == SCHEDULER_NAME
            and not p.gate_stamped
            and p.created > config.created
            and _epoch(p.created) >= now - LOOKBACK
            and webhook.selects_namespace(p.namespace) is not False
        ]
        new = [p for p in bypassed if p.uid not in self._seen]
        for pod in new:
            self._report(pod, config)
            self._last = (now, pod.key)
        self._seen = {p.uid for p in bypassed}  # a pod gone or past LOOKBACK is forgotten
        return new

    def recent(self) -> list[str]:
        """Why the placement manager must not look ready: a pod bypassed the gate in the last ``window``."""
        last = self._last
        if last is None or self._clock() - last[0] >= self._window:
            return []
        ago = self._clock() - last[0]
        return [f"pod {last[1]} was created around the admission gate {ago:.0f}s ago (events: GateBypassed)"]

    def _report(self, pod: Pod, config: WebhookConfiguration) -> None:
        message = (
            "created without the admission gate: the API server did not get an answer from the gate webhook "
            f"(MutatingWebhookConfiguration {config.name}, failurePolicy: Ignore), so kube-scheduler tries "
            "this pod outside the queues' fair order; the configuration's WebhookUntrusted events and the "
            "placement manager's log say why"
        )
        self._events.record(pod_ref(pod), "Warning", "GateBypassed", message)
        log.error("pod %s bypassed the admission gate: %s", pod.key, message)
        self._on_bypass()


def _epoch(created: str) -> float:
    """Seconds since the epoch of an RFC 3339 ``creationTimestamp`` (0 when unreadable)."""
    try:
        return datetime.fromisoformat(created).timestamp()
    except ValueError:
        return 0.0
