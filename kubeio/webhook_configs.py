"""The placement manager's MutatingWebhookConfigurations: read, and their ``caBundle`` set.

The API server calls each webhook of a configuration through its ``clientConfig``: a Service
(``https://<name>.<namespace>.svc:<port><path>``, verifying the certificate for the name
``<name>.<namespace>.svc``) or a URL, against ``caBundle`` (or its own system roots when that is
empty). The placement manager reads its configurations by name (RBAC: get, by name) to check that the
API server can call it (``placement.webhook_trust``) and, when it keeps its own certificates, writes
the CA into every webhook of them with a strategic merge patch keyed by webhook name (RBAC: patch, by
name), which leaves every other field, and any webhook it does not name, as it is.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, urlsplit

from kubeio.errors import NotFoundError
from kubeio.events import ObjectRef
from kubeio.http import JsonRequester

CONFIGS = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations"
STRATEGIC_MERGE = "application/strategic-merge-patch+json"
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"
"""The label the API server puts on every namespace, with the namespace's name as value."""


@dataclass(frozen=True, slots=True)
class Endpoint:
    """Where the API server calls a webhook and which name it expects on the certificate.

    Attributes:
        service: ``(namespace, name)`` of the Service, or ``None`` for a URL.
        host: the host dialled (the Service's DNS name, or the URL's host).
        port: the port dialled (the Service's port, or the URL's).
        path: the request path.
        server_name: the name the certificate must carry (``<name>.<namespace>.svc``, or the URL's host).
    """

    service: tuple[str, str] | None
    host: str
    port: int
    path: str
    server_name: str


@dataclass(frozen=True, slots=True)
class Webhook:
    """One webhook of a configuration."""

    name: str
    endpoint: Endpoint | None
    """``None``: its ``clientConfig`` names neither a Service nor a usable URL."""
    ca_bundle: bytes
    namespace_selector: Mapping[str, Any] = field(default_factory=dict)

    def selects_namespace(self, namespace: str) -> bool | None:
        """Whether the API server calls it for pods of ``namespace`` (``None``: it depends on other labels).

        Only the label every namespace has, ``kubernetes.io/metadata.name``, is known here; a selector
        on any other label cannot be decided without reading the namespace.
        """
        labels = {NAMESPACE_NAME_LABEL: namespace}
        selector = self.namespace_selector
        for key, value in (selector.get("matchLabels") or {}).items():
            if key != NAMESPACE_NAME_LABEL:
                return None
            if labels.get(key) != value:
                return False
        for expression in selector.get("matchExpressions") or []:
            key, operator = expression.get("key"), expression.get("operator")
            values = expression.get("values") or []
            if key != NAMESPACE_NAME_LABEL:
                return None
            present = key in labels
            matched = {
                "In": present and labels[key] in values,
                "NotIn": not present or labels[key] not in values,
                "Exists": present,
                "DoesNotExist": not present,
            }.get(str(operator))
            if matched is None:
                return None
            if not matched:
                return False
        return True


@dataclass(frozen=True, slots=True)
class WebhookConfiguration:
    """A MutatingWebhookConfiguration as read."""

    name: str
    uid: str
    created: str
    """``metadata.creationTimestamp`` (RFC 3339 text, sorts chronologically)."""
    webhooks: tuple[Webhook, ...]


def configuration_ref(config: WebhookConfiguration) -> ObjectRef:
    """The configuration as the object of an event (cluster-scoped: the event goes to ``default``)."""
    return ObjectRef(
        "MutatingWebhookConfiguration", "admissionregistration.k8s.io/v1", "", config.name, config.uid
    )


class WebhookConfigs:
    """Reads MutatingWebhookConfigurations by name and sets their ``caBundle``."""

    def __init__(self, http: JsonRequester, *, timeout: float = 10.0) -> None:
        self._http = http
        self._timeout = timeout

    def read(self, name: str) -> WebhookConfiguration | None:
        """The configuration, or ``None`` if it does not exist.

        Raises:
            KubeError: the API server failed or refused.
        """
        try:
            raw = self._http.request("GET", f"{CONFIGS}/{quote(name, safe='')}", timeout=self._timeout)
        except NotFoundError:
            return None
        meta = raw.get("metadata") or {}
        webhooks = tuple(_webhook(w) for w in raw.get("webhooks") or [] if isinstance(w, dict))
        return WebhookConfiguration(
            name, str(meta.get("uid") or ""), str(meta.get("creationTimestamp") or ""), webhooks
        )

    def set_ca_bundle(self, name: str, webhooks: Sequence[str], bundle: bytes) -> None:
        """Set ``caBundle`` to ``bundle`` on the named webhooks of configuration ``name``.

        Raises:
            KubeError: the API server failed or refused (NotFoundError: the configuration is gone).
        """
        encoded = base64.b64encode(bundle).decode()
        patch = {"webhooks": [{"name": w, "clientConfig": {"caBundle": encoded}} for w in webhooks]}
        self._http.request(
            "PATCH",
            f"{CONFIGS}/{quote(name, safe='')}",
            body=patch,
            content_type=STRATEGIC_MERGE,
            timeout=self._timeout,
        )


def _webhook(raw: dict[str, Any]) -> Webhook:
    found = raw.get("clientConfig")
    client: dict[str, Any] = found if isinstance(found, dict) else {}
    try:
        bundle = base64.b64decode(str(client.get("caBundle") or ""), validate=True)
    except (binascii.Error, ValueError):
        bundle = b"not base64"
    selector = raw.get("namespaceSelector")
    return Webhook(
        name=str(raw.get("name") or ""),
        endpoint=_endpoint(client),
        ca_bundle=bundle,
        namespace_selector=selector if isinstance(selector, dict) else {},
    )


def _endpoint(client: dict[str, Any]) -> Endpoint | None:
    service = client.get("service")
    if isinstance(service, dict):
        namespace, name = str(service.get("namespace") or ""), str(service.get("name") or "")
        port, path = service.get("port"), str(service.get("path") or "/")
        host = f"{name}.{namespace}.svc"
        return Endpoint((namespace, name), host, port if isinstance(port, int) else 443, path, host)
    url = client.get("url")
    if isinstance(url, str):
        try:
            parts = urlsplit(url)
            port = parts.port or 443
        except ValueError:
            return None
        if parts.hostname:
            return Endpoint(None, parts.hostname, port, parts.path or "/", parts.hostname)
    return None
