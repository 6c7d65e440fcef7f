"""The relay carries a connection both ways, byte for byte: TCP -> Unix socket -> TCP (``testbed.relay``)."""

from __future__ import annotations

import socket
import threading
from pathlib import Path

from testbed.relay import serve


def _echo_upper(listener: socket.socket) -> None:
    while True:
        try:
            client, _ = listener.accept()
        except OSError:  # closed at the end of the test
            return
        with client:
            while data := client.recv(1024):
                client.sendall(data.upper())


def test_a_connection_goes_through_both_relays_and_back(tmp_path: Path) -> None:
    server = socket.create_server(("127.0.0.1", 0))
    threading.Thread(target=_echo_upper, args=(server,), daemon=True).start()
    path = tmp_path / "api.sock"
    outside = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    outside.bind(str(path))
    outside.listen()
    target = server.getsockname()
    threading.Thread(
        target=serve, args=(outside, lambda: socket.create_connection(target)), daemon=True
    ).start()

    def to_unix() -> socket.socket:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.connect(str(path))
        return sock

    inside = socket.create_server(("127.0.0.1", 0))
    threading.Thread(target=serve, args=(inside, to_unix), daemon=True).start()
    with socket.create_connection(inside.getsockname(), timeout=10) as client:
        payload = b"GET /api HTTP/1.1\r\n" * 1000  # more than one buffer
        client.sendall(payload)
        client.shutdown(socket.SHUT_WR)
        received = b""
        while chunk := client.recv(65536):
            received += chunk
    assert received == payload.upper()
    for sock in (server, outside, inside):
        sock.close()
