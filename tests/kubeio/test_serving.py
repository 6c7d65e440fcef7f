"""The HTTP front over real sockets: slow clients hold no thread, every request gets an answer or a reason.

The server is the real one (``serve_in_thread``: an event loop thread and a thread pool) with a handler
that counts its calls, so a test sees both what a client got and whether a thread was ever spent on it.
"""

from __future__ import annotations

import http.client
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from socket import SocketIO

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kubeio.serving import BackgroundServer, FrontLimits, Reply, Request, serve_in_thread

WAIT = 15.0
"""Seconds a client waits for an answer that comes in milliseconds unless a thread is missing."""


@dataclass
class Counter:
    calls: list[Request] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, request: Request) -> Reply:
        with self.lock:
            self.calls.append(request)
        if request.target == "/boom":
            msg = "boom"
            raise RuntimeError(msg)
        body = f"{request.method} {request.target} {len(request.body)}".encode()
        return Reply(200, (("content-type", "text/plain"),), body)


@dataclass
class Served:
    server: BackgroundServer
    handler: Counter

    @property
    def port(self) -> int:
        return self.server.server_address[1]

    def connect(self) -> socket.socket:
        return socket.create_connection(("127.0.0.1", self.port), timeout=WAIT)

    def send(self, raw: bytes, *, half_close: bool = False) -> tuple[int, bytes]:
        with self.connect() as sock:
            sock.sendall(raw)
            if half_close:
                sock.shutdown(socket.SHUT_WR)
            reply = http.client.HTTPResponse(sock)
            reply.begin()
            return reply.status, reply.read()


def serve(**limits: float) -> Iterator[Served]:
    handler = Counter()
    bounds = FrontLimits(**{"max_body_bytes": 1000, **limits})  # type: ignore[arg-type]
    server = serve_in_thread(handler, host="127.0.0.1", port=0, limits=bounds, threads=2)
    try:
        yield Served(server, handler)
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def served() -> Iterator[Served]:
    yield from serve()


class Unbuffered:
    """A socket whose files read no byte past what they are asked for.

    ``http.client.HTTPResponse`` reads through ``sock.makefile("rb")``, a buffered file: when two pipelined
    replies have both arrived before the first is read (a busy machine delays the client), the first
    response's buffer swallows the second, and a second ``HTTPResponse`` on the socket waits for ever.
    """

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock

    def makefile(self, *_args: object, **_kwargs: object) -> SocketIO:
        return self.sock.makefile("rb", buffering=0)


def response(sock: socket.socket, method: str = "GET") -> http.client.HTTPResponse:
    """The next reply on ``sock``, read without taking a byte of the one after it."""
    reply = http.client.HTTPResponse(Unbuffered(sock), method=method)  # type: ignore[arg-type]
    reply.begin()
    return reply


def get(path: str) -> bytes:
    return f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode()


def test_clients_that_send_half_a_request_hold_no_thread(served: Served) -> None:
    slow = []
    for i in range(120):
        sock = served.connect()
        if i % 2:
            sock.sendall(b"POST /filter HTTP/1.1\r\nHost: x\r\nContent-Ty")
        else:
            sock.sendall(b"POST /filter HTTP/1.1\r\nHost: x\r\nContent-Length: 900\r\n\r\n{")
        slow.append(sock)
    try:
        assert served.send(get("/healthz")) == (200, b"GET /healthz 0")
        assert [r.target for r in served.handler.calls] == ["/healthz"], "no thread saw a slow client"
    finally:
        for sock in slow:
            sock.close()


def test_a_request_not_received_in_full_in_time_gets_408_with_the_reason() -> None:
    for served in serve(request_timeout=0.3):
        with served.connect() as sock:
            sock.sendall(b"POST /bind HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n{")
            reply = http.client.HTTPResponse(sock)
            reply.begin()
            assert reply.status == 408
            assert b"not received in full within 0.3s" in reply.read()
        assert served.handler.calls == []


def test_a_malformed_chunked_body_gets_400_before_any_handler(served: Served) -> None:
    raw = b"POST /bind HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n"
    status, body = served.send(raw)
    assert status == 400 and b"malformed HTTP request" in body and b"chunk" in body
    assert served.handler.calls == []


def test_a_chunked_body_reaches_the_handler_whole(served: Served) -> None:
    head = b"POST /bind HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
    raw = head + b"3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n"
    assert served.send(raw) == (200, b"POST /bind 5")


def test_a_body_above_the_limit_is_refused_from_its_length_before_it_is_read(served: Served) -> None:
    status, body = served.send(b"POST /bind HTTP/1.1\r\nHost: x\r\nContent-Length: 5000\r\n\r\n")
    assert status == 413 and body == b"request body of 5000 bytes is larger than the limit of 1000 bytes"
    chunked = b"POST /b HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n7d1\r\n" + b"x" * 2001
    status, body = served.send(chunked)
    assert status == 413 and b"more than 1000 bytes" in body
    assert served.handler.calls == []


def test_a_handler_that_raises_is_a_500_and_the_connection_goes_on(served: Served) -> None:
    with served.connect() as sock:
        sock.sendall(get("/boom") + get("/after"))
        first = response(sock)
        assert (first.status, first.read()) == (500, b"internal error; see the server's log")
        second = response(sock)
        assert (second.status, second.read()) == (200, b"GET /after 0")


def test_at_the_connection_bound_the_longest_waiting_connection_is_closed() -> None:
    for served in serve(max_connections=5):
        idle = [served.connect() for _ in range(5)]
        try:
            idle[0].sendall(b"GET /x HTTP/1.1\r\nHo")  # the oldest: half a request
            assert served.send(get("/healthz")) == (200, b"GET /healthz 0")
            try:
                closed = idle[0].recv(100) == b""
            except ConnectionResetError:  # closed with its half request unread
                closed = True
            assert closed, "the longest-waiting connection was closed for the new one"
            idle[1].sendall(get("/still-open"))
            assert idle[1].recv(100).startswith(b"HTTP/1.1 200 OK\r\n")
        finally:
            for sock in idle:
                sock.close()


def test_head_gets_the_length_and_no_body(served: Served) -> None:
    with served.connect() as sock:
        sock.sendall(b"HEAD /x HTTP/1.1\r\nHost: x\r\n\r\n" + get("/y"))
        head = response(sock, "HEAD")
        assert head.status == 200 and head.getheader("content-length") == str(len(b"HEAD /x 0"))
        head.read()
        following = response(sock)
        assert following.read() == b"GET /y 0"


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    data=st.one_of(
        st.binary(max_size=300),
        st.builds(
            lambda head, junk: head + junk,
            st.sampled_from(
                [b"POST /f HTTP/1.1\r\nHost: x\r\n", b"GET / HTTP/1.1\r\n", b"POST / HTTP/1.0\r\n"]
            ),
            st.binary(max_size=200),
        ),
    )
)
def test_any_bytes_get_an_http_answer_and_never_a_500(served: Served, data: bytes) -> None:
    with served.connect() as sock:
        sock.sendall(data)
        sock.shutdown(socket.SHUT_WR)
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
    if data.strip(b"\r\n"):
        assert received.startswith(b"HTTP/1.1 "), (data, received)
        assert not received.startswith(b"HTTP/1.1 5"), (data, received)
