"""The webhook server serves a changed certificate from the next connection on, without a restart.

The real HTTPS server with certificate files as a mounted Secret would give them: a client verifying
against the new CA is refused before the files change and answered after ``reload``; a key that does
not match its certificate keeps the old pair served; no files, no certificate.
"""

from __future__ import annotations

import logging
import os
import ssl
import urllib.error
import urllib.request
from datetime import UTC, datetime
from pathlib import Path

import pytest

from placement.certificates import KeyPair, make_ca, make_serving, serial_of
from placement.serving_tls import ServingTls, files_loader
from placement.webhook import serve_webhook


def write(directory: Path, pair: KeyPair) -> None:
    """As the kubelet updates a mounted Secret: each file replaced whole."""
    for name, data in (("tls.key", pair.key), ("tls.crt", pair.cert)):
        tmp = directory / f".{name}.tmp"
        tmp.write_bytes(data)
        os.replace(tmp, directory / name)


def healthz(port: int, ca: KeyPair) -> int:
    context = ssl.create_default_context(cadata=ca.cert.decode())
    with urllib.request.urlopen(f"https://127.0.0.1:{port}/healthz", context=context, timeout=10) as reply:
        return int(reply.status)


def test_rotated_files_are_served_from_the_next_connection_on(tmp_path: Path) -> None:
    now = datetime.now(UTC)
    first_ca, second_ca = make_ca(now), make_ca(now)
    first, second = make_serving(first_ca, ["127.0.0.1"], now), make_serving(second_ca, ["127.0.0.1"], now)
    write(tmp_path, first)
    tls = ServingTls(files_loader(str(tmp_path / "tls.crt"), str(tmp_path / "tls.key")))
    assert tls.reload()
    server = serve_webhook({}, host="127.0.0.1", port=0, tls=tls)
    port = int(server.server_address[1])
    try:
        assert healthz(port, first_ca) == 200
        write(tmp_path, second)
        with pytest.raises(urllib.error.URLError, match="CERTIFICATE_VERIFY_FAILED"):
            healthz(port, second_ca)  # not reloaded yet: still the first certificate
        assert tls.reload(), "the change is seen"
        assert not tls.reload(), "and only once"
        assert healthz(port, second_ca) == 200, "the new certificate, same server"
        assert tls.certificate is not None and serial_of(tls.certificate) == serial_of(second.cert)
    finally:
        server.shutdown()
        server.server_close()


def test_a_pair_that_does_not_load_keeps_the_served_one(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    now = datetime.now(UTC)
    ca = make_ca(now)
    good = make_serving(ca, ["127.0.0.1"], now)
    write(tmp_path, good)
    tls = ServingTls(files_loader(str(tmp_path / "tls.crt"), str(tmp_path / "tls.key")))
    assert tls.reload()
    mismatched = KeyPair(make_serving(ca, ["127.0.0.1"], now).cert, good.key)
    write(tmp_path, mismatched)
    with caplog.at_level(logging.ERROR):
        assert not tls.reload()
        assert not tls.reload()
    assert [r.getMessage() for r in caplog.records if "do not load" in r.getMessage()][:1], caplog.text
    assert len([r for r in caplog.records if "do not load" in r.getMessage()]) == 1, "logged once per pair"
    assert tls.certificate == good.cert


def test_without_files_there_is_nothing_to_serve_and_connections_are_closed(tmp_path: Path) -> None:
    tls = ServingTls(files_loader(str(tmp_path / "tls.crt"), str(tmp_path / "tls.key")))
    assert not tls.reload()
    assert tls.context() is None and tls.certificate is None
    server = serve_webhook({}, host="127.0.0.1", port=0, tls=tls)
    try:
        with pytest.raises((urllib.error.URLError, ConnectionError)):
            healthz(int(server.server_address[1]), make_ca(datetime.now(UTC)))
    finally:
        server.shutdown()
        server.server_close()
