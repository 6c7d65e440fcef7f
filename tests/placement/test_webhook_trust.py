"""The trust check, against the real HTTPS server of the webhooks: what the API server would meet.

A configuration whose caBundle verifies the served certificate for the name the API server uses is
trusted; a wrong CA, an empty caBundle, a name the certificate lacks, a path not served, another
Service and a port nobody listens on each get a sentence saying so.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime

import pytest

from kubeio.webhook_configs import Endpoint, Webhook, WebhookConfiguration
from placement.certificates import KeyPair, make_ca, make_serving
from placement.serving_tls import ServingTls
from placement.webhook import GATE_PATH, MUTATE_PATH, serve_webhook
from placement.webhook_trust import OwnServer, Trust, check_configuration, handshake

SERVICE = ("phalanx-system", "phalanx-placement-webhook")
SERVICE_NAME = "phalanx-placement-webhook.phalanx-system.svc"


@dataclass(frozen=True)
class Served:
    ca: KeyPair
    own: OwnServer


@pytest.fixture(scope="module")
def served() -> Iterator[Served]:
    """The webhook server with a certificate for the Service name and 127.0.0.1."""
    now = datetime.now(UTC)
    ca = make_ca(now)
    pair = make_serving(ca, [SERVICE_NAME, "127.0.0.1"], now)
    tls = ServingTls(lambda: pair)
    assert tls.reload()
    server = serve_webhook({MUTATE_PATH: ok, GATE_PATH: ok}, host="127.0.0.1", port=0, tls=tls)
    try:
        port = int(server.server_address[1])
        yield Served(ca, OwnServer("127.0.0.1", port, {MUTATE_PATH, GATE_PATH}, SERVICE, GATE_PATH))
    finally:
        server.shutdown()
        server.server_close()


def ok(_body: bytes) -> tuple[int, bytes]:
    return 200, b"{}"


def service_hook(name: str, path: str, bundle: bytes, service: tuple[str, str] = SERVICE) -> Webhook:
    host = f"{service[1]}.{service[0]}.svc"
    return Webhook(name, Endpoint(service, host, 443, path, host), bundle)


def url_hook(name: str, port: int, path: str, bundle: bytes, host: str = "127.0.0.1") -> Webhook:
    return Webhook(name, Endpoint(None, host, port, path, host), bundle)


def config(*webhooks: Webhook) -> WebhookConfiguration:
    return WebhookConfiguration("phalanx-admission-gate", "uid", "2026-01-01T00:00:00Z", webhooks)


def test_a_service_webhook_whose_ca_bundle_signed_the_certificate_is_trusted(served: Served) -> None:
    trusts = check_configuration(
        config(service_hook("gates.phalanx.io", GATE_PATH, served.ca.cert)), served.own
    )
    assert trusts == [Trust("phalanx-admission-gate", "gates.phalanx.io", True, None)]


def test_a_url_webhook_is_dialled_where_the_api_server_dials_it(served: Served) -> None:
    hook = url_hook("pins.phalanx.io", served.own.port, MUTATE_PATH, served.ca.cert)
    assert check_configuration(config(hook), served.own) == [
        Trust("phalanx-admission-gate", "pins.phalanx.io", False, None)
    ]
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        closed = free.getsockname()[1]
    (trust,) = check_configuration(
        config(url_hook("pins.phalanx.io", closed, MUTATE_PATH, served.ca.cert)), served.own
    )
    assert trust.problem is not None and trust.problem.startswith(f"nothing answers at 127.0.0.1:{closed}")


def test_a_mismatched_ca_bundle_is_untrusted_with_what_the_api_server_would_meet(served: Served) -> None:
    other = make_ca(datetime.now(UTC)).cert
    (trust,) = check_configuration(config(service_hook("gates.phalanx.io", GATE_PATH, other)), served.own)
    assert trust.gates
    assert trust.problem == (
        f"the certificate at 127.0.0.1:{served.own.port} does not verify against its caBundle as "
        f"{SERVICE_NAME}: unable to get local issuer certificate"
    )


def test_an_empty_ca_bundle_means_the_system_roots_which_do_not_know_this_ca(served: Served) -> None:
    (trust,) = check_configuration(config(service_hook("gates.phalanx.io", GATE_PATH, b"")), served.own)
    assert trust.problem is not None and trust.problem.startswith("its caBundle is empty and no system root")


def test_a_name_the_certificate_does_not_carry_is_untrusted(served: Served) -> None:
    hook = url_hook("pins.phalanx.io", served.own.port, MUTATE_PATH, served.ca.cert, host="localhost")
    (trust,) = check_configuration(config(hook), served.own)
    assert trust.problem is not None and "as localhost" in trust.problem and "mismatch" in trust.problem


@pytest.mark.parametrize(
    ("hook", "problem"),
    [
        (
            Webhook("gates.phalanx.io", None, b""),
            "its clientConfig names no Service and no usable URL",
        ),
        (
            service_hook("gates.phalanx.io", "/gate", b"x"),
            "it calls the path /gate, which the placement manager does not serve (/gate-pods, /mutate-pods)",
        ),
        (
            service_hook("gates.phalanx.io", GATE_PATH, b"x", ("default", "phalanx")),
            "it calls the Service default/phalanx, not the placement manager's "
            "(phalanx-system/phalanx-placement-webhook)",
        ),
        (
            service_hook("gates.phalanx.io", GATE_PATH, b"not pem"),
            "its caBundle holds no readable PEM certificate",
        ),
    ],
    ids=["no endpoint", "wrong path", "another Service", "unreadable caBundle"],
)
def test_a_client_config_the_api_server_cannot_use_says_why(
    served: Served, hook: Webhook, problem: str
) -> None:
    (trust,) = check_configuration(config(hook), served.own)
    assert trust.problem == problem


def test_every_webhook_of_a_configuration_is_checked_on_its_own(served: Served) -> None:
    trusts = check_configuration(
        config(
            service_hook("pins.phalanx.io", MUTATE_PATH, served.ca.cert),
            service_hook("gates.phalanx.io", GATE_PATH, make_ca(datetime.now(UTC)).cert),
        ),
        served.own,
    )
    assert [(t.webhook, t.gates, t.problem is None) for t in trusts] == [
        ("pins.phalanx.io", False, True),
        ("gates.phalanx.io", True, False),
    ]


def test_a_bundle_of_two_cas_trusts_a_certificate_of_either(served: Served) -> None:
    bundle = make_ca(datetime.now(UTC)).cert + served.ca.cert
    assert handshake(("127.0.0.1", served.own.port), SERVICE_NAME, bundle, timeout=5) is None
