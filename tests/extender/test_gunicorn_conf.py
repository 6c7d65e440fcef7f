"""gunicorn's settings for the extender: plain HTTP by default, HTTPS (TLS 1.2+) given a certificate."""

from __future__ import annotations

import importlib
import ssl
from collections.abc import Iterator
from types import ModuleType

import pytest

import extender.gunicorn_conf


def _load(monkeypatch: pytest.MonkeyPatch, env: dict[str, str]) -> ModuleType:
    for name in ("PHALANX_TLS_CERT_FILE", "PHALANX_TLS_KEY_FILE"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return importlib.reload(extender.gunicorn_conf)


@pytest.fixture(autouse=True)
def _reload_after(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Put the module back as the environment has it, for whoever imports it next."""
    yield
    monkeypatch.undo()
    importlib.reload(extender.gunicorn_conf)


def test_without_a_certificate_gunicorn_serves_plain_http(monkeypatch: pytest.MonkeyPatch) -> None:
    conf = _load(monkeypatch, {})
    assert not hasattr(conf, "certfile")
    assert not hasattr(conf, "keyfile")


def test_with_a_certificate_gunicorn_serves_https_from_tls_1_2(monkeypatch: pytest.MonkeyPatch) -> None:
    conf = _load(
        monkeypatch, {"PHALANX_TLS_CERT_FILE": "/tls/tls.crt", "PHALANX_TLS_KEY_FILE": "/tls/tls.key"}
    )
    assert (conf.certfile, conf.keyfile) == ("/tls/tls.crt", "/tls/tls.key")

    def permissive() -> ssl.SSLContext:  # as an old OpenSSL configuration might allow
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.MINIMUM_SUPPORTED
        return context

    assert conf.ssl_context(None, permissive).minimum_version == ssl.TLSVersion.TLSv1_2
