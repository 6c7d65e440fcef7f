"""The webhooks' own certificates: made, kept while good, renewed in time, and accepted by a real TLS client.

Every case is checked by what matters, whether a client trusting the stored CA bundle accepts the served
certificate for a name: a real TLS handshake for certificates made now (``tls_accepts``), and the
``cryptography`` path validator at the time of the case for certificates of years ahead (``verifies``),
not by reading fields back.
"""

from __future__ import annotations

import ipaddress
import socket
import ssl
import threading
from datetime import UTC, datetime, timedelta

import pytest
from cryptography import x509
from cryptography.x509.verification import PolicyBuilder, Store, VerificationError

from placement.certificates import (
    CA_LIFETIME,
    RENEW_BEFORE,
    SERVING_LIFETIME,
    KeyPair,
    WebhookCerts,
    make_ca,
    make_serving,
    renew,
)
from placement.serving_tls import server_context

NOW = datetime(2030, 1, 1, tzinfo=UTC)
NAMES = ["phalanx-placement-webhook.phalanx-system.svc", "127.0.0.1"]


def tls_accepts(bundle: bytes, serving: KeyPair, name: str) -> bool:
    """Whether a client trusting ``bundle`` completes a handshake with a server of ``serving`` as ``name``."""
    server_side = server_context(serving)
    client = ssl.create_default_context(cadata=bundle.decode())
    listener = socket.create_server(("127.0.0.1", 0))
    errors: list[Exception] = []

    def serve() -> None:
        conn, _ = listener.accept()
        try:
            with server_side.wrap_socket(conn, server_side=True):
                pass
        except (ssl.SSLError, OSError) as exc:
            errors.append(exc)

    thread = threading.Thread(target=serve)
    thread.start()
    try:
        with (
            socket.create_connection(listener.getsockname(), timeout=10) as raw,
            client.wrap_socket(raw, server_hostname=name),
        ):
            return True
    except ssl.SSLCertVerificationError:
        return False
    finally:
        thread.join(10)
        listener.close()


def verifies(bundle: bytes, serving: KeyPair, name: str, at: datetime) -> bool:
    """Whether a client trusting ``bundle`` at time ``at`` accepts ``serving`` for the DNS name ``name``."""
    try:
        subject: x509.DNSName | x509.IPAddress = x509.IPAddress(ipaddress.ip_address(name))
    except ValueError:
        subject = x509.DNSName(name)
    verifier = PolicyBuilder().store(Store(cas(bundle))).time(at).build_server_verifier(subject)
    try:
        verifier.verify(x509.load_pem_x509_certificate(serving.cert), [])
    except VerificationError:
        return False
    return True


def certs_of(renewal: object) -> WebhookCerts:
    assert renewal is not None
    certs = getattr(renewal, "certs", None)
    assert isinstance(certs, WebhookCerts)
    return certs


def cas(bundle: bytes) -> list[x509.Certificate]:
    return x509.load_pem_x509_certificates(bundle)


def test_nothing_stored_gives_a_ca_and_a_serving_certificate_a_client_trusts_for_every_name() -> None:
    now = datetime.now(UTC)  # a real handshake checks against the real clock
    renewal = renew(None, NAMES, now)
    assert renewal is not None and renewal.reason == "no usable certificates were stored"
    certs = renewal.certs
    for name in NAMES:
        assert tls_accepts(certs.ca_bundle, certs.serving, name), name
    assert not tls_accepts(certs.ca_bundle, certs.serving, "other.phalanx-system.svc")
    assert not tls_accepts(make_ca(now).cert, certs.serving, NAMES[0]), "another CA does not verify it"


def test_good_certificates_are_kept_as_they_are() -> None:
    certs = certs_of(renew(None, NAMES, NOW))
    assert renew(certs, NAMES, NOW) is None
    still_good = NOW + SERVING_LIFETIME - RENEW_BEFORE - timedelta(days=1)
    assert renew(certs, list(reversed(NAMES)), still_good) is None


def test_new_names_renew_the_serving_certificate_under_the_same_ca() -> None:
    certs = certs_of(renew(None, NAMES, NOW))
    renewal = renew(certs, ["127.0.0.1"], NOW)
    assert renewal is not None and "names" in renewal.reason
    assert (renewal.certs.ca_bundle, renewal.certs.ca_key) == (certs.ca_bundle, certs.ca_key)
    assert verifies(certs.ca_bundle, renewal.certs.serving, "127.0.0.1", NOW), "configurations need no change"
    assert not verifies(certs.ca_bundle, renewal.certs.serving, NAMES[0], NOW), "the old name is gone"


def test_a_serving_certificate_is_renewed_90_days_before_it_expires() -> None:
    certs = certs_of(renew(None, NAMES, NOW))
    soon = NOW + SERVING_LIFETIME - RENEW_BEFORE + timedelta(days=1)
    renewal = renew(certs, NAMES, soon)
    assert renewal is not None and renewal.reason.startswith("the serving certificate expires on")
    assert renewal.certs.ca_bundle == certs.ca_bundle
    assert verifies(certs.ca_bundle, renewal.certs.serving, NAMES[0], soon + RENEW_BEFORE)
    assert not verifies(certs.ca_bundle, certs.serving, NAMES[0], soon + RENEW_BEFORE), "the old one expired"


def test_a_ca_near_its_end_is_replaced_and_the_old_one_stays_trusted_until_it_expires() -> None:
    first = certs_of(renew(None, NAMES, NOW))
    old_ca = cas(first.ca_bundle)[0]
    late = NOW + CA_LIFETIME - RENEW_BEFORE + timedelta(days=1)
    served = make_serving(KeyPair(first.ca_bundle, first.ca_key), NAMES, late - timedelta(days=10))
    certs = WebhookCerts(first.ca_bundle, first.ca_key, served)  # what a replica serves at the time
    renewal = renew(certs, NAMES, late)
    assert renewal is not None and renewal.reason.startswith("the CA expires on")
    new_bundle = cas(renewal.certs.ca_bundle)
    assert [c.serial_number for c in new_bundle[1:]] == [old_ca.serial_number], "the old CA stays, second"
    assert new_bundle[0].serial_number != old_ca.serial_number
    assert verifies(renewal.certs.ca_bundle, renewal.certs.serving, NAMES[0], late)
    assert verifies(renewal.certs.ca_bundle, served, NAMES[0], late), "a replica not reloaded yet is trusted"
    assert not verifies(first.ca_bundle, renewal.certs.serving, NAMES[0], late), "signed by the new CA"
    assert renew(renewal.certs, NAMES, late) is None
    after_old_expired = NOW + CA_LIFETIME + timedelta(days=1)
    pruned = renew(renewal.certs, NAMES, after_old_expired)
    assert pruned is not None and pruned.reason == "a CA in the bundle expired"
    assert [c.serial_number for c in cas(pruned.certs.ca_bundle)] == [new_bundle[0].serial_number]


@pytest.mark.parametrize(
    "damage",
    ["the CA key is another", "the serving key is another", "garbage", "signed by another CA"],
)
def test_unusable_certificates_are_made_again(damage: str) -> None:
    certs = certs_of(renew(None, NAMES, NOW))
    other = make_ca(NOW)
    broken = {
        "the CA key is another": WebhookCerts(certs.ca_bundle, other.key, certs.serving),
        "the serving key is another": WebhookCerts(
            certs.ca_bundle, certs.ca_key, KeyPair(certs.serving.cert, other.key)
        ),
        "garbage": WebhookCerts(b"not pem", certs.ca_key, certs.serving),
        "signed by another CA": WebhookCerts(certs.ca_bundle, certs.ca_key, make_serving(other, NAMES, NOW)),
    }[damage]
    renewal = renew(broken, NAMES, NOW)
    assert renewal is not None
    assert verifies(renewal.certs.ca_bundle, renewal.certs.serving, NAMES[0], NOW)
    assert renew(renewal.certs, NAMES, NOW) is None


def test_a_secrets_data_round_trips_and_a_missing_key_reads_as_nothing() -> None:
    certs = certs_of(renew(None, NAMES, NOW))
    data = certs.to_data()
    assert sorted(data) == ["ca.crt", "ca.key", "tls.crt", "tls.key"]
    assert WebhookCerts.from_data(data) == certs
    assert WebhookCerts.from_data({**data, "tls.key": b""}) is None
    assert WebhookCerts.from_data({}) is None


def test_a_certificate_needs_a_name() -> None:
    with pytest.raises(ValueError, match="at least one name"):
        renew(None, [], NOW)
