"""The webhook server's TLS context, made again whenever its certificate or key changes.

Certificates are replaced while the placement manager runs: cert-manager renews the Secret mounted as
files, an admin rotates them, or the placement manager renews its own (``placement.cert_keeper``). The
server takes its context from here for every connection it accepts (``placement.webhook``), so a new
certificate is served from the next handshake on, without a restart; connections already open keep
the certificate they were opened with.

``reload`` reads the certificate and key (``load``: the files, or what the Secret last held) and builds
a new context only when their bytes differ from what is served: a change is detected by content, not by
file times, because the kubelet replaces a mounted Secret by swapping a symlink. A pair that does not
load (a key that does not match, half-written files) leaves the served context in place and is logged
once per pair; it is read again at the next ``reload``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import ssl
import tempfile
import threading
from collections.abc import Callable, Iterator

from placement.certificates import KeyPair

log = logging.getLogger(__name__)

Loader = Callable[[], KeyPair | None]
"""Reads the certificate and key to serve now (``None``: there is none yet)."""


class ServingTls:
    """The SSL context to serve now; thread-safe (the server asks for it on every connection)."""

    def __init__(self, load: Loader) -> None:
        self._load = load
        self._lock = threading.Lock()
        self._context: ssl.SSLContext | None = None
        self._served: KeyPair | None = None
        self._refused: KeyPair | None = None

    def context(self) -> ssl.SSLContext | None:
        """The context of the certificate served now, or ``None`` before any certificate loaded."""
        return self._context

    @property
    def certificate(self) -> bytes | None:
        """The PEM certificate served now, or ``None``."""
        served = self._served
        return None if served is None else served.cert

    def reload(self) -> bool:
        """Read the certificate and key again; serve them from the next connection on if they changed.

        Returns:
            Whether a new certificate is served from now on.
        """
        try:
            pair = self._load()
        except OSError as exc:
            log.warning("webhook certificate not read: %s", exc)
            return False
        with self._lock:
            if pair is None or pair == self._served or pair == self._refused:
                return False
            try:
                context = server_context(pair)
            except (ssl.SSLError, OSError) as exc:
                self._refused = pair
                log.error("webhook certificate and key do not load (%s); still serving the previous one", exc)
                return False
            first = self._served is None
            self._context, self._served, self._refused = context, pair, None
        log.info("webhook serving %s certificate", "its" if first else "a new")
        return True


def files_loader(cert_file: str, key_file: str) -> Loader:
    """Reads ``cert_file`` and ``key_file`` (``None`` while either is missing: no Secret mounted yet)."""

    def load() -> KeyPair | None:
        try:
            with open(cert_file, "rb") as cert, open(key_file, "rb") as key:
                return KeyPair(cert.read(), key.read())
        except FileNotFoundError:
            return None

    return load


def server_context(pair: KeyPair) -> ssl.SSLContext:
    """A TLS server context (TLS 1.2 at least) serving ``pair``.

    Raises:
        ssl.SSLError: the certificate or key is unreadable, or they do not match.
    """
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    with _pem_path(pair.cert) as cert, _pem_path(pair.key) as key:
        context.load_cert_chain(cert, key)
    return context


@contextlib.contextmanager
def _pem_path(data: bytes) -> Iterator[str]:
    """A path to ``data`` for ``load_cert_chain``, which reads only files.

    An anonymous in-memory file (``memfd_create``) on Linux: the root filesystem is read-only in the
    pod and the key never touches a disk. Elsewhere a private temporary file, removed at once.
    """
    if hasattr(os, "memfd_create"):
        fd = os.memfd_create("phalanx-webhook-pem", os.MFD_CLOEXEC)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            yield f"/proc/self/fd/{fd}"
        finally:
            os.close(fd)
        return
    with tempfile.NamedTemporaryFile(suffix=".pem") as handle:  # mode 0600
        handle.write(data)
        handle.flush()
        yield handle.name
