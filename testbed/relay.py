"""A byte relay between TCP and a Unix socket: how a process in its own network namespace reaches the API.

The Kubeflow MPI Operator v0.7.0 serves its health check on ``:8080``, a constant with no flag, and exits
when the port is taken, so two test beds on one machine (two developers' test runs, a demo beside a
test run) cannot both run it. The test bed runs it in a network namespace of its own instead
(``unshare --net``), where its port 8080 is its own; its only peer, the API server, is reached through
this relay: inside the namespace a ``tcp-to-unix`` relay listens on the API server's loopback address and
passes each connection, byte for byte (TLS stays end to end), over a Unix socket, which crosses network
namespaces, to a ``unix-to-tcp`` relay outside that connects to the API server.

``tcp-to-unix`` runs the command after ``--`` once it listens and exits with it, so the namespace lives
exactly as long as the operator. Run: ``python -m testbed.relay unix-to-tcp --listen PATH --to HOST:PORT``
and ``python -m testbed.relay tcp-to-unix --listen HOST:PORT --to PATH -- COMMAND...``.

``tcp-to-tcp`` stands in for a Service in front of several replicas: the placement manager ships as two
replicas that both serve the webhooks behind ``phalanx-placement-webhook``, so the API server's calls
reach whichever is alive. Each connection goes to the next backend in turn (kube-proxy spreads them too),
and to the one after it when that one refuses (a replica being restarted): ``python -m testbed.relay
tcp-to-tcp --listen HOST:PORT --to HOST:PORT,HOST:PORT``.
"""

from __future__ import annotations

import argparse
import contextlib
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

BUFFER = 65536


def _pump(source: socket.socket, sink: socket.socket) -> None:
    """Copy ``source`` to ``sink`` until ``source`` ends, then end ``sink``'s sending half."""
    with contextlib.suppress(OSError):
        while data := source.recv(BUFFER):
            sink.sendall(data)
    with contextlib.suppress(OSError):
        sink.shutdown(socket.SHUT_WR)


def _join(client: socket.socket, connect: Callable[[], socket.socket]) -> None:
    """Relay one accepted connection to a new one made by ``connect``, both ways, then close both."""
    with client:
        try:
            upstream = connect()
        except OSError:
            return
        with upstream:
            back = threading.Thread(target=_pump, args=(upstream, client), daemon=True)
            back.start()
            _pump(client, upstream)
            back.join()


def serve(listener: socket.socket, connect: Callable[[], socket.socket]) -> None:
    """Accept connections on ``listener`` until it is closed, each relayed by its own thread."""
    while True:
        try:
            client, _ = listener.accept()
        except OSError:  # closed
            return
        threading.Thread(target=_join, args=(client, connect), daemon=True).start()


class Backends:
    """The replicas behind a ``tcp-to-tcp`` relay; ``connect`` opens a connection to one that answers."""

    def __init__(self, addresses: Sequence[tuple[str, int]]) -> None:
        self._addresses = list(addresses)
        self._next = 0
        self._lock = threading.Lock()

    def connect(self) -> socket.socket:
        """A connection to the next backend in turn that accepts one.

        Raises:
            OSError: none does (every replica is down).
        """
        with self._lock:
            start = self._next
            self._next = (self._next + 1) % len(self._addresses)
        failure: OSError | None = None
        for i in range(len(self._addresses)):
            address = self._addresses[(start + i) % len(self._addresses)]
            try:
                return socket.create_connection(address, timeout=2)
            except OSError as exc:
                failure = exc
        assert failure is not None
        raise failure


def _address(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    return host, int(port)


def main(argv: Sequence[str] | None = None) -> int:
    """Command line entry point; returns the command's exit code for ``tcp-to-unix``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("direction", choices=("tcp-to-unix", "unix-to-tcp", "tcp-to-tcp"))
    parser.add_argument("--listen", required=True, help="HOST:PORT (tcp-to-unix) or a socket path")
    parser.add_argument(
        "--to", required=True, help="a socket path (tcp-to-unix), HOST:PORT, or HOST:PORT,... (tcp-to-tcp)"
    )
    words = list(sys.argv[1:] if argv is None else argv)
    cut = words.index("--") if "--" in words else len(words)
    args = parser.parse_args(words[:cut])
    command = words[cut + 1 :]
    if args.direction == "unix-to-tcp":
        path = Path(args.listen)
        path.unlink(missing_ok=True)
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(str(path))
        listener.listen(64)
        target = _address(args.to)
        serve(listener, lambda: socket.create_connection(target))
        return 0
    listener = socket.create_server(_address(args.listen), backlog=64)
    if args.direction == "tcp-to-tcp":
        backends = Backends([_address(a) for a in args.to.split(",") if a])
        serve(listener, backends.connect)
        return 0

    def to_unix() -> socket.socket:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.connect(args.to)
        except OSError:
            sock.close()
            raise
        return sock

    threading.Thread(target=serve, args=(listener, to_unix), daemon=True).start()
    if not command:
        parser.error("tcp-to-unix needs -- COMMAND")
    child = subprocess.Popen(command)
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda number, _frame: child.send_signal(number))
    return child.wait()


if __name__ == "__main__":
    sys.exit(main())
