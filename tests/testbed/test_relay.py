"""The relay carries a connection both ways, byte for byte: TCP -> Unix socket -> TCP (``testbed.relay``)."""

from __future__ import annotations

import socket
import threading
from pathlib import Path

from testbed.relay import Backends, serve


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


def _ask(address: tuple[str, int]) -> bytes:
    with socket.create_connection(address, timeout=10) as client:
        client.sendall(b"who")
        client.shutdown(socket.SHUT_WR)
        return client.recv(1024)


def test_a_service_relay_spreads_connections_and_skips_a_replica_that_is_down() -> None:
    """Two webhook replicas behind one address, as behind their Service: one down, the other answers."""
    up = socket.create_server(("127.0.0.1", 0))
    threading.Thread(target=_echo_upper, args=(up,), daemon=True).start()
    down = socket.create_server(("127.0.0.1", 0))
    down_address = down.getsockname()
    down.close()  # a replica being restarted: its port refuses connections
    front = socket.create_server(("127.0.0.1", 0))
    backends = Backends([down_address, up.getsockname()])
    threading.Thread(target=serve, args=(front, backends.connect), daemon=True).start()
    assert [_ask(front.getsockname()) for _ in range(4)] == [b"WHO"] * 4
    for sock in (up, front):
        sock.close()
