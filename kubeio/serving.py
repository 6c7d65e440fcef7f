"""The HTTP/1.1 front of phalanx's servers: whole requests are read on one event loop, then handed to threads.

kube-scheduler calls the extender, and the API server calls the placement manager's webhooks. Both
handlers are blocking code (a gang's bind waits in a barrier for up to ~25 s, the pin webhook reads from
the API server), so they need threads; but a thread must never be spent on a client that is still
sending. A server that gives each connection a thread as soon as it opens (gunicorn's ``gthread``
worker, the standard library's ``ThreadingHTTPServer``) lets any client that sends half a request and
waits hold one: measured on the extender, 300 connections that sent part of their headers took all
256 threads, and ``/healthz`` and ``/filter`` went unanswered until the clients went away.

Here an asyncio loop reads every connection, without threads, with h11 (a sans-I/O HTTP/1.1 parser,
also used by httpcore and uvicorn) doing the parsing; only a request received in full, headers and
body, is handed to the thread pool, and its reply is written back by the loop (a client that does not
read its reply holds no thread either). Bounds, all in ``FrontLimits``:

- a request must arrive in full within ``request_timeout`` of its first byte (408 otherwise), a kept-alive
  connection is closed after ``idle_timeout`` without one, a reply must be taken within
  ``write_timeout``, a TLS handshake must end within ``request_timeout``;
- headers are at most ``max_header_bytes``, a body at most ``max_body_bytes`` (413 with the limit,
  decided from ``Content-Length`` before the body is read);
- at ``max_connections`` open connections, a new one closes the connection that has waited longest
  without a request being served, so connections that never finish a request cannot lock out one that
  does; connections whose request is being served are never closed.

Framing errors (a malformed chunked body, a bad header line) are answered 400 with h11's reason before any
handler runs. Why not a library server: hypercorn reads the body before calling a WSGI app too, but has
no deadline for a request's headers and body as a whole and no connection bound; granian streams the
body into the thread that runs the app; waitress has no TLS.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import ssl
import threading
from collections.abc import Callable
from concurrent.futures import Executor, ThreadPoolExecutor
from dataclasses import dataclass, field
from http import HTTPStatus

import h11

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Request:
    """One request, received in full.

    Attributes:
        method: ``GET``, ``POST``, ...
        target: the request target as sent: path and query (``/filter``, ``/debug/decision?pod=a/b``).
        headers: lower-case names and their values, in order, decoded as Latin-1.
        body: the whole body (chunked bodies de-chunked).
        client: the peer's address, if known.
        server: the local address the request came in on.
        scheme: ``http`` or ``https``.
    """

    method: str
    target: str
    headers: tuple[tuple[str, str], ...]
    body: bytes
    client: tuple[str, int] | None
    server: tuple[str, int]
    scheme: str


@dataclass(frozen=True, slots=True)
class Reply:
    """A handler's answer; ``Content-Length`` is added by the front."""

    status: int
    headers: tuple[tuple[str, str], ...] = ()
    body: bytes = b""


_PHRASES = {status.value: status.phrase for status in HTTPStatus}

_GONE = (OSError, TimeoutError, h11.LocalProtocolError, h11.RemoteProtocolError)
"""What ends a connection quietly: the client left, stalled, or broke the protocol while being answered."""

Handler = Callable[[Request], Reply]
"""Answers one request, in a thread of the pool."""

Refusal = Callable[[int, str], Reply]
"""The answer to a request the front refuses itself: its status and the reason (400, 408, 413)."""


def text_refusal(status: int, reason: str) -> Reply:
    """A plain-text refusal."""
    return Reply(status, (("content-type", "text/plain; charset=utf-8"),), reason.encode())


@dataclass(frozen=True, slots=True)
class FrontLimits:
    """How long and how much a client may take."""

    max_body_bytes: int
    """Largest request body."""

    max_header_bytes: int = 64 * 1024
    """Largest request line plus headers."""

    request_timeout: float = 10.0
    """Seconds from a request's first byte to its last (and the longest TLS handshake)."""

    idle_timeout: float = 75.0
    """Seconds a kept-alive connection may wait for its next request."""

    write_timeout: float = 30.0
    """Seconds a client may take to receive a reply."""

    max_connections: int = 1000
    """Open connections beyond which the one waiting longest without being served is closed."""


@dataclass(eq=False, slots=True)
class _Slot:
    """One open connection: since when it waits, and whether a handler is serving it."""

    writer: asyncio.StreamWriter
    since: float
    busy: bool = False


class _RefusedError(Exception):
    """The front answers the request itself (status and reason) and closes the connection."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


@dataclass(slots=True)
class HttpFront:
    """Serves connections (``connected`` is the ``asyncio.start_server`` callback) with ``handle``."""

    handle: Handler
    pool: Executor
    limits: FrontLimits
    refuse: Refusal = text_refusal
    _slots: set[_Slot] = field(default_factory=set)

    @property
    def open_connections(self) -> int:
        """Connections open now."""
        return len(self._slots)

    @property
    def busy(self) -> int:
        """Requests being served now."""
        return sum(slot.busy for slot in self._slots)

    async def connected(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Serve one connection until the client closes it, times out or is refused."""
        loop = asyncio.get_running_loop()
        slot = _Slot(writer, loop.time())
        self._make_room()
        self._slots.add(slot)
        conn = h11.Connection(h11.SERVER, max_incomplete_event_size=self.limits.max_header_bytes)
        try:
            while True:
                got = await self._read(conn, reader, writer)
                if got is None:
                    return
                request = self._request(got, writer)
                slot.busy = True
                try:
                    reply = await loop.run_in_executor(self.pool, self._answer, request)
                finally:
                    slot.busy = False
                await self._send(conn, writer, reply, head=request.method == "HEAD")
                if conn.our_state is not h11.DONE or conn.their_state is not h11.DONE:
                    return
                conn.start_next_cycle()
                slot.since = loop.time()
        except _RefusedError as refused:
            log.info("refused a request from %s: %s", writer.get_extra_info("peername"), refused.reason)
            with contextlib.suppress(*_GONE):
                await self._send(conn, writer, self.refuse(refused.status, refused.reason), close=True)
        except _GONE:
            pass  # the client went away, stalled while reading its reply, or cannot be answered
        finally:
            self._slots.discard(slot)
            writer.close()

    def close_all(self) -> None:
        """Close every open connection (at shutdown)."""
        for slot in list(self._slots):
            slot.writer.close()

    def _make_room(self) -> None:
        """At the connection bound, close the connection that has waited longest without being served."""
        if len(self._slots) < self.limits.max_connections:
            return
        idle = [slot for slot in self._slots if not slot.busy]
        if idle:
            oldest = min(idle, key=lambda slot: slot.since)
            self._slots.discard(oldest)
            oldest.writer.close()

    async def _read(
        self, conn: h11.Connection, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> tuple[h11.Request, bytes] | None:
        """The next request and its whole body; ``None`` when the client closed or went idle too long.

        Raises:
            _RefusedError: malformed, too large, or not complete in time.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.limits.idle_timeout
        started = False
        request: h11.Request | None = None
        body = bytearray()
        while True:
            try:
                event = conn.next_event()
            except h11.RemoteProtocolError as exc:
                raise _RefusedError(exc.error_status_hint, f"malformed HTTP request: {exc}") from None
            if event is h11.NEED_DATA:
                try:
                    async with asyncio.timeout_at(deadline):
                        data = await reader.read(65536)
                except TimeoutError:
                    if not started:
                        return None
                    msg = f"the request was not received in full within {self.limits.request_timeout:g}s"
                    raise _RefusedError(408, msg) from None
                if data and not started:
                    started = True
                    deadline = loop.time() + self.limits.request_timeout
                conn.receive_data(data)
            elif isinstance(event, h11.Request):
                request = event
                self._check_length(event)
                if _header(event, b"expect").lower() == b"100-continue":
                    writer.write(conn.send(h11.InformationalResponse(status_code=100, headers=[])) or b"")
            elif isinstance(event, h11.Data):
                body += event.data
                if len(body) > self.limits.max_body_bytes:
                    raise _RefusedError(
                        413, self._too_large(f"of more than {self.limits.max_body_bytes} bytes")
                    )
            elif isinstance(event, h11.EndOfMessage) and request is not None:
                return request, bytes(body)
            else:  # ConnectionClosed, or PAUSED after a message (never here: one request at a time)
                return None

    def _check_length(self, request: h11.Request) -> None:
        length = _header(request, b"content-length")
        if length.isdigit() and int(length) > self.limits.max_body_bytes:
            raise _RefusedError(413, self._too_large(f"of {int(length)} bytes"))

    def _too_large(self, size: str) -> str:
        return f"request body {size} is larger than the limit of {self.limits.max_body_bytes} bytes"

    @staticmethod
    def _request(got: tuple[h11.Request, bytes], writer: asyncio.StreamWriter) -> Request:
        event, body = got
        peer = writer.get_extra_info("peername")
        local = writer.get_extra_info("sockname")
        return Request(
            method=event.method.decode("ascii"),
            target=event.target.decode("latin-1"),
            headers=tuple((name.decode("latin-1"), value.decode("latin-1")) for name, value in event.headers),
            body=body,
            client=(str(peer[0]), int(peer[1])) if isinstance(peer, tuple) else None,
            server=(str(local[0]), int(local[1])) if isinstance(local, tuple) else ("", 0),
            scheme="https" if writer.get_extra_info("sslcontext") is not None else "http",
        )

    def _answer(self, request: Request) -> Reply:
        """Run the handler (in a pool thread); a handler that raises is a logged 500, never a lost reply."""
        try:
            return self.handle(request)
        except Exception:
            log.exception("%s %s failed", request.method, request.target[:200])
            return self.refuse(500, "internal error; see the server's log")

    async def _send(
        self,
        conn: h11.Connection,
        writer: asyncio.StreamWriter,
        reply: Reply,
        *,
        close: bool = False,
        head: bool = False,
    ) -> None:
        if conn.our_state not in (h11.IDLE, h11.SEND_RESPONSE):
            return
        headers = [(k, v) for k, v in reply.headers if k.lower() not in ("content-length", "connection")]
        headers.append(("content-length", str(len(reply.body))))
        if close:
            headers.append(("connection", "close"))
        reason = _PHRASES.get(reply.status, "").encode()
        data = conn.send(h11.Response(status_code=reply.status, headers=headers, reason=reason)) or b""
        if reply.body and not head:  # a reply to HEAD has a length but no body
            data += conn.send(h11.Data(data=reply.body)) or b""
        data += conn.send(h11.EndOfMessage()) or b""
        writer.write(data)
        async with asyncio.timeout(self.limits.write_timeout):
            await writer.drain()


def _header(request: h11.Request, name: bytes) -> bytes:
    return next((value for key, value in request.headers if key == name), b"")


class BackgroundServer:
    """An ``HttpFront`` serving one listening socket from its own event loop thread.

    The socket is bound before this returns (``server_address`` is known, a taken port raises at once).
    """

    def __init__(
        self,
        front: HttpFront,
        sock: socket.socket,
        *,
        context: ssl.SSLContext | None = None,
        name: str = "http-front",
    ) -> None:
        self.front = front
        self.server_address: tuple[str, int] = sock.getsockname()[:2]
        self._loop = asyncio.new_event_loop()
        self._sock = sock
        self._context = context
        self._started = threading.Event()
        self._server: asyncio.Server | None = None
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()
        self._started.wait()

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._server = self._loop.run_until_complete(
            asyncio.start_server(
                self.front.connected,
                sock=self._sock,
                ssl=self._context,
                ssl_handshake_timeout=self.front.limits.request_timeout if self._context else None,
            )
        )
        self._started.set()
        self._loop.run_forever()

    def shutdown(self) -> None:
        """Stop accepting and close every connection; requests being served finish in their threads."""
        if not self._thread.is_alive():
            return
        future = asyncio.run_coroutine_threadsafe(self._stop(), self._loop)
        with contextlib.suppress(Exception):
            future.result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    async def _stop(self) -> None:
        if self._server is not None:
            self._server.close()
        self.front.close_all()
        for _ in range(10):  # let the closed transports release their sockets
            if not self.front.open_connections:
                break
            await asyncio.sleep(0.05)

    def server_close(self) -> None:
        """Release the socket and the loop (after ``shutdown``)."""
        self._sock.close()
        if not self._thread.is_alive():
            self._loop.close()


def serve_in_thread(
    handle: Handler,
    *,
    host: str,
    port: int,
    limits: FrontLimits,
    threads: int,
    context: ssl.SSLContext | None = None,
    refuse: Refusal = text_refusal,
    name: str = "http-front",
) -> BackgroundServer:
    """Serve ``handle`` on ``host:port`` (0: any free port) from a daemon thread; ``shutdown()`` stops it.

    Raises:
        OSError: the address cannot be bound.
    """
    sock = socket.create_server((host, port), backlog=1024)
    pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix=name)
    front = HttpFront(handle, pool, limits, refuse)
    return BackgroundServer(front, sock, context=context, name=name)
