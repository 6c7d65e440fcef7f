"""Keeps the webhooks callable and says so when they are not: certificates, CA bundles, trust checks.

Every few seconds (``--webhook-check-seconds``), on every replica that serves the webhooks:

1. **Certificates.** With internal management the Secret is read and renewed if needed
   (``placement.cert_keeper``); then the served certificate is reloaded if its bytes changed
   (``placement.serving_tls``), from the Secret or from the mounted files.
2. **Configurations.** Each of ``--webhook-configurations`` is read by name. With internal management
   every webhook whose ``caBundle`` is not the Secret's CA bundle gets it (a configuration re-applied
   from the manifests, or edited by hand, is repaired within one check).
3. **Trust.** Each webhook is checked as the API server would call it (``placement.webhook_trust``).
   ``phalanx_webhook_trusted{configuration,webhook}`` is 1 or 0. A webhook that becomes uncallable gets
   an ERROR log line and a Warning event ``WebhookUntrusted`` on its configuration (again every
   ``report_every`` seconds while it lasts); one that recovers gets a Normal event ``WebhookTrusted``.
   While the admission gate webhook is untrusted (and gates are on) the replica is not ready
   (``not_ready``, served as ``/readyz``).

A configuration that does not exist is not checked: deleting it is how an admin turns a webhook off.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Callable, Sequence

from prometheus_client import Gauge

from kubeio.errors import KubeError
from kubeio.ports import ConfigAccess, EventSink
from kubeio.webhook_configs import Webhook, WebhookConfiguration, configuration_ref
from placement.cert_keeper import CertKeeper, CertKeeperError
from placement.serving_tls import ServingTls
from placement.webhook_trust import OwnServer, Trust, check_configuration

log = logging.getLogger(__name__)

REPORT_EVERY = 600.0
"""Seconds between two reports (log line, event) of a webhook that stays uncallable for the same reason."""


class WebhookWatch:
    """The checks above, and their latest outcome for readiness and the bypass detector."""

    def __init__(
        self,
        *,
        tls: ServingTls,
        configs: ConfigAccess,
        names: Sequence[str],
        own: OwnServer,
        events: EventSink,
        trusted: Gauge,
        clock: Callable[[], float],
        source: str,
        keeper: CertKeeper | None = None,
        gates: bool = True,
        report_every: float = REPORT_EVERY,
    ) -> None:
        self._tls = tls
        self._configs = configs
        self._names = tuple(names)
        self._own = own
        self._events = events
        self._trusted = trusted
        self._clock = clock
        self._source = source
        self._keeper = keeper
        self._gates = gates
        self._report_every = report_every
        self._read: dict[str, WebhookConfiguration | None] = {}
        self._told: dict[tuple[str, str], tuple[str, float]] = {}
        self._trusts: tuple[Trust, ...] | None = None

    def run(self, stop: threading.Event, every: float) -> None:
        """Check every ``every`` seconds (the first after ``every``) until ``stop``; a failure is logged."""
        while not stop.wait(every):
            try:
                self.check_once()
            except Exception:  # the next check reads everything again
                log.exception("webhook check failed")

    def check_once(self) -> tuple[Trust, ...]:
        """One round of certificates, configurations and trust (see the module docstring)."""
        no_certificate = self._certificates()
        trusts: list[Trust] = []
        for name in self._names:
            config = self._configuration(name)
            if config is None:
                continue
            if no_certificate is not None:
                trusts += [Trust(name, w.name, self._gating(w), no_certificate) for w in config.webhooks]
            else:
                trusts += check_configuration(config, self._own)
        self._report(trusts)
        self._trusts = tuple(trusts)
        return self._trusts

    def not_ready(self) -> list[str]:
        """Why this replica must not look ready: the gate webhook cannot be called (or no check yet)."""
        trusts = self._trusts
        if trusts is None:
            return ["the webhooks have not been checked yet"]
        if not self._gates:
            return []
        return [
            f"the API server cannot call webhook {t.webhook} of {t.configuration}: {t.problem}"
            for t in trusts
            if t.gates and t.problem is not None
        ]

    def gate(self) -> tuple[WebhookConfiguration, Webhook] | None:
        """The registered admission gate webhook and its configuration, as last read (``None``: none)."""
        for name in self._names:
            config = self._read.get(name)
            if config is None:
                continue
            for webhook in config.webhooks:
                if self._gating(webhook):
                    return config, webhook
        return None

    def _gating(self, webhook: Webhook) -> bool:
        return webhook.endpoint is not None and webhook.endpoint.path == self._own.gate_path

    def _certificates(self) -> str | None:
        """Renew (internal) and reload the certificate; why there is none to serve, or ``None``."""
        failure = ""
        if self._keeper is not None:
            try:
                self._keeper.sync()
            except (KubeError, CertKeeperError) as exc:
                failure = f": {exc}"
                log.error("webhook certificates: Secret %s not read or written: %s", self._keeper.secret, exc)
        self._tls.reload()
        if self._tls.certificate is None:
            return f"this replica has no certificate to serve yet ({self._source}{failure})"
        return None

    def _configuration(self, name: str) -> WebhookConfiguration | None:
        """Read ``name`` (the last read on a failure) and, with internal management, set its CA bundle."""
        try:
            config = self._configs.read(name)
        except KubeError as exc:
            log.warning("webhook configuration %s not read: %s", name, exc)
            config = self._read.get(name)
        if config is None and self._read.get(name) is not None:
            log.info("webhook configuration %s is gone: its webhooks are no longer called", name)
        certs = None if self._keeper is None else self._keeper.certs
        if config is not None and certs is not None:
            config = self._inject(config, certs.ca_bundle)
        self._read[name] = config
        return config

    def _inject(self, config: WebhookConfiguration, bundle: bytes) -> WebhookConfiguration:
        stale = [w.name for w in config.webhooks if w.ca_bundle != bundle]
        if not stale:
            return config
        try:
            self._configs.set_ca_bundle(config.name, stale, bundle)
        except KubeError as exc:
            log.error("CA bundle not written into webhook configuration %s: %s", config.name, exc)
            return config
        log.info("CA bundle written into webhook configuration %s (%s)", config.name, ", ".join(stale))
        webhooks = tuple(
            dataclasses.replace(w, ca_bundle=bundle) if w.name in stale else w for w in config.webhooks
        )
        return dataclasses.replace(config, webhooks=webhooks)

    def _report(self, trusts: Sequence[Trust]) -> None:
        now = self._clock()
        current = {(t.configuration, t.webhook): t for t in trusts}
        for key, trust in current.items():
            self._trusted.labels(*key).set(0 if trust.problem else 1)
            told = self._told.get(key)
            if trust.problem is None:
                if told is not None:
                    del self._told[key]
                    self._tell(trust, "Normal", "WebhookTrusted", "the API server can call it again")
                    log.info("webhook %s of %s can be called again", trust.webhook, trust.configuration)
                continue
            if told is None or told[0] != trust.problem or now - told[1] >= self._report_every:
                self._told[key] = (trust.problem, now)
                self._tell(trust, "Warning", "WebhookUntrusted", self._untrusted(trust))
                log.error("%s", self._untrusted(trust))
        for key in [k for k in self._told if k not in current]:
            del self._told[key]
        for configuration, webhook in self._gauged() - set(current):
            self._trusted.remove(configuration, webhook)

    def _gauged(self) -> set[tuple[str, str]]:
        return {
            (s.labels["configuration"], s.labels["webhook"])
            for metric in self._trusted.collect()
            for s in metric.samples
        }

    def _untrusted(self, trust: Trust) -> str:
        effect = (
            "pods of scheduler phalanx are created without the admission gate and bypass the queues' order"
            if trust.gates
            else "elastic workers are not pinned as they are created (the pass pins them later)"
        )
        fix = (
            f"the placement manager writes the CA of Secret {self._keeper.secret} here itself: its log says "
            "why it could not"
            if self._keeper is not None
            else f"set caBundle of every webhook here to the CA that signed the certificate in {self._source}"
        )
        return (
            f"the API server cannot call webhook {trust.webhook} of {trust.configuration}: {trust.problem}. "
            f"It fails open (failurePolicy: Ignore): {effect}. To fix: {fix}."
        )

    def _tell(self, trust: Trust, type_: str, reason: str, message: str) -> None:
        config = self._read.get(trust.configuration)
        if config is not None:
            self._events.record(configuration_ref(config), type_, reason, message)
