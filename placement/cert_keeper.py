"""Internal certificate management: the webhooks' CA and serving certificate, kept in one Secret.

With ``--webhook-certs=internal`` (the default) the placement manager needs no certificate from
anyone. Every replica reads the Secret (``--webhook-cert-secret``, shipped empty in the manifests) every
few seconds; when it holds nothing usable, or a certificate nears its end or names the wrong hosts,
the replica writes new ones (``placement.certificates.renew``). The Secret is the one source of
truth: a write names the ``resourceVersion`` it read (a create, the absence of the Secret), so of two
replicas writing at once the API server refuses one (409), which then reads the Secret again and
serves what the other wrote. Both replicas therefore always serve one certificate of one CA.

The CA bundle goes into the webhook configurations (``placement.webhook_watch``), and the serving
certificate to the server (``placement.serving_tls``), both from what ``sync`` last read.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from datetime import datetime

from kubeio.ports import SecretAccess
from placement.certificates import KeyPair, WebhookCerts, renew

log = logging.getLogger(__name__)

MANAGED_BY = {"app.kubernetes.io/managed-by": "phalanx-placement"}
"""Labels of a Secret the placement manager creates itself (where it may create one)."""


class CertKeeperError(Exception):
    """The Secret could not be brought to good certificates (the message says why)."""


class CertKeeper:
    """Keeps good webhook certificates in the Secret and remembers what it last read or wrote."""

    def __init__(
        self,
        secrets: SecretAccess,
        namespace: str,
        name: str,
        *,
        names: Sequence[str],
        clock: Callable[[], datetime],
        attempts: int = 3,
    ) -> None:
        self._secrets = secrets
        self._namespace = namespace
        self._name = name
        self._names = tuple(names)
        self._clock = clock
        self._attempts = attempts
        self._certs: WebhookCerts | None = None

    @property
    def secret(self) -> str:
        """``namespace/name`` of the Secret."""
        return f"{self._namespace}/{self._name}"

    @property
    def certs(self) -> WebhookCerts | None:
        """The certificates last read or written, or ``None`` before the first good ``sync``."""
        return self._certs

    def serving(self) -> KeyPair | None:
        """The serving certificate and key to serve now (a ``placement.serving_tls.Loader``)."""
        certs = self._certs
        return None if certs is None else certs.serving

    def sync(self) -> WebhookCerts:
        """Read the Secret; write new certificates if it needs them; return what it holds now.

        Raises:
            KubeError: the API server failed or refused (e.g. the Secret is missing and the replica may
                not create it: the manifests ship it).
            CertKeeperError: every attempt lost a race with another writer.
        """
        for _ in range(self._attempts):
            stored = self._secrets.read(self._namespace, self._name)
            current = WebhookCerts.from_data(stored.data) if stored is not None else None
            renewal = renew(current, self._names, self._clock())
            if renewal is None:
                assert current is not None  # nothing to renew means something good was stored
                self._adopt(current)
                return current
            data = renewal.certs.to_data()
            if stored is None:
                written = self._secrets.create(self._namespace, self._name, data, MANAGED_BY)
            else:
                written = self._secrets.update(stored, data)
            if written:
                log.info(
                    "webhook certificates %s in Secret %s: %s",
                    "created" if stored is None else "renewed",
                    self.secret,
                    renewal.reason,
                )
                self._certs = renewal.certs
                return renewal.certs
            log.info("Secret %s was written by another replica meanwhile; reading it again", self.secret)
        msg = f"the Secret {self.secret} changed under every one of {self._attempts} attempts to write it"
        raise CertKeeperError(msg)

    def _adopt(self, current: WebhookCerts) -> None:
        if self._certs is not None and current != self._certs:
            log.info("webhook certificates in Secret %s changed (another replica renewed them)", self.secret)
        self._certs = current
