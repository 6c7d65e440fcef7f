"""The webhooks' own certificates: a CA and the serving certificate it signs, made and renewed here.

The API server calls a webhook over TLS and verifies the server's certificate against the ``caBundle``
of the webhook's configuration; a mismatch fails the call, and a webhook with ``failurePolicy: Ignore``
then lets the pod through as if it did not exist. So the placement manager makes its own CA and serving
certificate (kept in one Secret, ``placement.cert_keeper``) and puts the CA into its configurations
itself, as Kueue does with cert-controller, instead of asking an admin to get both right by hand.

The lifetimes and the renewal margin are cert-controller's: the CA lives 10 years, the serving
certificate 1 year, each is renewed 90 days before it expires, and both start an hour in the past so a
clock a little behind still accepts them. One difference: a renewed CA does not replace the old one in
the bundle. The bundle keeps every CA still valid, newest first, so a replica that still serves a
certificate of the old CA (it reads the Secret again a few seconds later) stays trusted meanwhile.

Keys are ECDSA P-256: small, fast to make, and accepted by the API server's Go TLS client.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

CA_LIFETIME = timedelta(days=3650)
SERVING_LIFETIME = timedelta(days=365)
RENEW_BEFORE = timedelta(days=90)
"""A certificate that expires sooner than this is made again (cert-controller's lookahead)."""
BACKDATE = timedelta(hours=1)
"""Validity starts this long before ``now``: a node whose clock is a little behind still accepts it."""

CA_NAME = "phalanx-webhook-ca"

CA_CERT, CA_KEY, TLS_CERT, TLS_KEY = "ca.crt", "ca.key", "tls.crt", "tls.key"
"""The Secret's keys (cert-controller's; ``tls.crt``/``tls.key`` as in a ``kubernetes.io/tls`` Secret)."""


@dataclass(frozen=True, slots=True)
class KeyPair:
    """A certificate and its private key, both PEM."""

    cert: bytes
    key: bytes


@dataclass(frozen=True, slots=True)
class WebhookCerts:
    """What the Secret holds: the CAs the webhook configurations trust and the serving key pair.

    Attributes:
        ca_bundle: PEM of every CA still trusted, newest first (the configurations' ``caBundle``).
        ca_key: PEM key of the newest CA, which signs the serving certificate.
        serving: the serving certificate and key.
    """

    ca_bundle: bytes
    ca_key: bytes
    serving: KeyPair

    def to_data(self) -> dict[str, bytes]:
        """The Secret's ``data`` (not yet base64-encoded)."""
        return {
            CA_CERT: self.ca_bundle,
            CA_KEY: self.ca_key,
            TLS_CERT: self.serving.cert,
            TLS_KEY: self.serving.key,
        }

    @staticmethod
    def from_data(data: Mapping[str, bytes]) -> WebhookCerts | None:
        """The certificates in a Secret's decoded ``data``, or ``None`` when a key is missing or empty."""
        if not all(data.get(k) for k in (CA_CERT, CA_KEY, TLS_CERT, TLS_KEY)):
            return None
        return WebhookCerts(data[CA_CERT], data[CA_KEY], KeyPair(data[TLS_CERT], data[TLS_KEY]))


@dataclass(frozen=True, slots=True)
class Renewal:
    """New certificates to store, and why."""

    certs: WebhookCerts
    reason: str


def renew(current: WebhookCerts | None, names: Sequence[str], now: datetime) -> Renewal | None:
    """The certificates to store instead of ``current``, or ``None`` while ``current`` is good.

    ``current`` is good when its newest CA matches its key and has more than ``RENEW_BEFORE`` left, and
    its serving certificate matches its key, was signed by that CA, names exactly ``names`` and has more
    than ``RENEW_BEFORE`` left. Otherwise what is wrong is made again: the serving certificate alone
    when the CA is good, else a new CA as well (kept in the bundle before the old CAs still valid).

    Args:
        current: what the Secret holds (``None``: nothing usable).
        names: the serving certificate's subject alternative names; an IP address is an IP SAN.
        now: the wall clock (timezone-aware).
    """
    if not names:
        msg = "a serving certificate needs at least one name"
        raise ValueError(msg)
    parsed = _parse(current)
    if current is None or parsed is None:
        return Renewal(_fresh(names, now), "no usable certificates were stored")
    cas, cert, key = parsed
    valid = [ca for ca in cas if ca.not_valid_after_utc > now]
    if cas[0].not_valid_after_utc - now < RENEW_BEFORE:
        ca = _make_ca(now)
        bundle = b"".join([ca.cert, *(_pem(c) for c in valid)])
        why = f"the CA expires on {cas[0].not_valid_after_utc:%Y-%m-%d}"
        return Renewal(WebhookCerts(bundle, ca.key, _make_serving(ca, names, now)), why)
    problem = _serving_problem(cas[0], cert, key, names, now)
    if problem is None and len(valid) == len(cas):
        return None
    serving = current.serving
    if problem is not None:
        serving = _make_serving(KeyPair(_pem(cas[0]), current.ca_key), names, now)
    bundle = b"".join(_pem(c) for c in valid)
    return Renewal(WebhookCerts(bundle, current.ca_key, serving), problem or "a CA in the bundle expired")


def not_after(cert_pem: bytes) -> datetime:
    """When the (first) certificate of ``cert_pem`` expires."""
    return x509.load_pem_x509_certificate(cert_pem).not_valid_after_utc


def serial_of(cert_pem: bytes) -> int:
    """The serial number of the (first) certificate of ``cert_pem``: which certificate is served."""
    return x509.load_pem_x509_certificate(cert_pem).serial_number


def make_ca(now: datetime) -> KeyPair:
    """A new self-signed CA (also for tests and for an admin's own bundle)."""
    return _make_ca(now)


def make_serving(ca: KeyPair, names: Sequence[str], now: datetime) -> KeyPair:
    """A serving certificate for ``names`` signed by ``ca``."""
    return _make_serving(ca, names, now)


def _fresh(names: Sequence[str], now: datetime) -> WebhookCerts:
    ca = _make_ca(now)
    return WebhookCerts(ca.cert, ca.key, _make_serving(ca, names, now))


_Parsed = tuple[list[x509.Certificate], x509.Certificate, object]


def _parse(current: WebhookCerts | None) -> _Parsed | None:
    """The stored CAs, serving certificate and key; ``None`` if one is unreadable or the CA key is wrong."""
    if current is None:
        return None
    try:
        cas = x509.load_pem_x509_certificates(current.ca_bundle)
        ca_key = serialization.load_pem_private_key(current.ca_key, password=None)
        cert = x509.load_pem_x509_certificate(current.serving.cert)
        key = serialization.load_pem_private_key(current.serving.key, password=None)
    except (ValueError, TypeError):
        return None
    if not isinstance(ca_key, ec.EllipticCurvePrivateKey) or not _same_key(cas[0], ca_key):
        return None
    return cas, cert, key


def _serving_problem(
    ca: x509.Certificate, cert: x509.Certificate, key: object, names: Sequence[str], now: datetime
) -> str | None:
    """Why the serving certificate must be made again, or ``None``."""
    if not isinstance(key, ec.EllipticCurvePrivateKey) or not _same_key(cert, key):
        return "the serving certificate does not match its key"
    try:
        cert.verify_directly_issued_by(ca)
    except (ValueError, TypeError, InvalidSignature):
        return "the serving certificate was not signed by the current CA"
    try:
        sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        sans = x509.SubjectAlternativeName([])
    have = {str(n.value) for n in sans}
    if have != {str(_san(n).value) for n in names}:
        return f"the serving certificate names {sorted(have)}, not {sorted(names)}"
    if cert.not_valid_after_utc - now < RENEW_BEFORE:
        return f"the serving certificate expires on {cert.not_valid_after_utc:%Y-%m-%d}"
    return None


def _same_key(cert: x509.Certificate, key: ec.EllipticCurvePrivateKey) -> bool:
    raw = serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    return cert.public_key().public_bytes(*raw) == key.public_key().public_bytes(*raw)


def _make_ca(now: datetime) -> KeyPair:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, CA_NAME)])
    usage = x509.KeyUsage(
        digital_signature=True,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=True,
        crl_sign=True,
        encipher_only=False,
        decipher_only=False,
    )
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - BACKDATE)
        .not_valid_after(now + CA_LIFETIME)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(usage, critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return KeyPair(_pem(cert), _key_pem(key))


def _make_serving(ca: KeyPair, names: Sequence[str], now: datetime) -> KeyPair:
    ca_cert = x509.load_pem_x509_certificate(ca.cert)
    ca_key = serialization.load_pem_private_key(ca.key, password=None)
    if not isinstance(ca_key, ec.EllipticCurvePrivateKey):
        msg = "the CA key is not an EC key"
        raise ValueError(msg)
    key = ec.generate_private_key(ec.SECP256R1())
    usage = x509.KeyUsage(
        digital_signature=True,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=False,
        crl_sign=False,
        encipher_only=False,
        decipher_only=False,
    )
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, names[0][:64])]))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - BACKDATE)
        .not_valid_after(min(now + SERVING_LIFETIME, ca_cert.not_valid_after_utc))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(usage, critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectAlternativeName([_san(n) for n in names]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    return KeyPair(_pem(cert), _key_pem(key))


def _san(name: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(name))
    except ValueError:
        return x509.DNSName(name)


def _pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
