"""Can the API server call this webhook? Checked as the API server would: a real TLS handshake.

A webhook with ``failurePolicy: Ignore`` that the API server cannot call is silent: every call fails,
the pod is created as if the webhook did not exist, and nothing says so. The placement manager
therefore checks each webhook of its configurations the way the API server calls it: it connects to
the same server (the URL of a ``url`` client configuration; itself for a ``service`` one, since the
Service leads to the replicas and each replica checks its own server), verifies the certificate against
the webhook's ``caBundle`` (the system roots when it is empty, as the API server does) for the name the
API server expects (``<service>.<namespace>.svc``, or the URL's host), and checks that the path is one
it serves and the Service is its own. Any failure is a sentence saying what the API server would meet.
"""

from __future__ import annotations

import socket
import ssl
from collections.abc import Collection
from dataclasses import dataclass

from kubeio.webhook_configs import Webhook, WebhookConfiguration


@dataclass(frozen=True, slots=True)
class Trust:
    """One webhook's check.

    Attributes:
        configuration: the MutatingWebhookConfiguration's name.
        webhook: the webhook's name in it.
        gates: it is the admission gate webhook (its path is the gate path): pods bypass the queues
            while it cannot be called.
        problem: why the API server cannot call it, or ``None`` when it can.
    """

    configuration: str
    webhook: str
    gates: bool
    problem: str | None


@dataclass(frozen=True, slots=True)
class OwnServer:
    """What this replica serves: where to reach it, its paths, and the Service that leads to it."""

    host: str
    port: int
    paths: Collection[str]
    service: tuple[str, str]
    """``(namespace, name)`` of the Service in front of the replicas."""
    gate_path: str


def check_configuration(config: WebhookConfiguration, own: OwnServer, *, timeout: float = 5.0) -> list[Trust]:
    """Check every webhook of ``config`` (see the module docstring)."""
    return [
        Trust(
            config.name,
            webhook.name,
            webhook.endpoint is not None and webhook.endpoint.path == own.gate_path,
            _problem(webhook, own, timeout),
        )
        for webhook in config.webhooks
    ]


def _problem(webhook: Webhook, own: OwnServer, timeout: float) -> str | None:
    endpoint = webhook.endpoint
    if endpoint is None:
        return "its clientConfig names no Service and no usable URL"
    if endpoint.path not in own.paths:
        served = ", ".join(sorted(own.paths))
        return f"it calls the path {endpoint.path}, which the placement manager does not serve ({served})"
    if endpoint.service is not None and endpoint.service != own.service:
        want = "/".join(own.service)
        return f"it calls the Service {'/'.join(endpoint.service)}, not the placement manager's ({want})"
    address = (own.host, own.port) if endpoint.service is not None else (endpoint.host, endpoint.port)
    return handshake(address, endpoint.server_name, webhook.ca_bundle, timeout=timeout)


def handshake(address: tuple[str, int], server_name: str, ca_bundle: bytes, *, timeout: float) -> str | None:
    """Why a TLS client trusting ``ca_bundle`` cannot talk to ``address`` as ``server_name``, or ``None``.

    An empty ``ca_bundle`` means the system roots, as for the API server.
    """
    try:
        context = ssl.create_default_context(cadata=ca_bundle.decode("ascii")) if ca_bundle else None
    except (ssl.SSLError, UnicodeDecodeError, ValueError):
        return "its caBundle holds no readable PEM certificate"
    if context is None:
        context = ssl.create_default_context()
    where = f"{address[0]}:{address[1]}"
    try:
        with (
            socket.create_connection(address, timeout=timeout) as raw,
            context.wrap_socket(raw, server_hostname=server_name),
        ):
            return None
    except ssl.SSLCertVerificationError as exc:
        what = exc.verify_message or str(exc)
        if not ca_bundle:
            return f"its caBundle is empty and no system root trusts the certificate at {where}: {what}"
        return f"the certificate at {where} does not verify against its caBundle as {server_name}: {what}"
    except ssl.SSLError as exc:
        return f"the TLS handshake with {where} fails: {exc.reason or exc}"
    except OSError as exc:
        return f"nothing answers at {where}: {exc.strerror or exc}"
