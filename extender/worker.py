"""The gunicorn worker the extender runs in: the asyncio front of ``kubeio.serving`` before a thread pool.

gunicorn's ``gthread`` worker hands a connection to a thread as soon as it has bytes to read, and the
thread then blocks until the request is complete: 300 clients that sent part of their headers and
stopped held all 256 threads, and kube-scheduler's ``/filter`` and the kubelet's ``/healthz`` went
unanswered. This worker reads every request in full on one event loop (``kubeio.serving.HttpFront``:
a deadline for each request, a bound on connections and body size) and only then runs the Flask app in
one of ``threads`` threads, which a gang's bind may still hold for its barrier (up to ~25 s). Everything
else stays gunicorn's: the arbiter, the listening sockets, TLS (``certfile``, ``keyfile`` and the
``ssl_context`` hook of ``extender.gunicorn_conf``), ``keepalive`` (the idle timeout),
``worker_connections`` (the connection bound) and ``graceful_timeout``.

The app is called through a minimal WSGI environ built from the buffered request (PEP 3333), and its
reply is collected and written back by the loop, so a client that does not read its reply holds no
thread either.
"""

from __future__ import annotations

import asyncio
import io
import os
import sys
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from urllib.parse import unquote_to_bytes

import orjson
from gunicorn import sock as gunicorn_sock
from gunicorn.workers.base import Worker

from extender.extender_settings import ExtenderSettings
from extender.hot import front_handler
from kubeio.serving import FrontLimits, HttpFront, Reply, Request

WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


def json_refusal(status: int, reason: str) -> Reply:
    """A refusal in the extender's error shape (``{"Error": reason}``), as the routes answer."""
    return Reply(status, (("content-type", "application/json"),), orjson.dumps({"Error": reason}))


def wsgi_handler(app: WsgiApp) -> Callable[[Request], Reply]:
    """A ``kubeio.serving`` handler that calls the WSGI ``app`` with the buffered request."""

    def handle(request: Request) -> Reply:
        started: list[Any] = []

        def start_response(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
            started[:] = [status, headers]
            return _no_write

        chunks = app(environ(request), start_response)
        try:
            body = b"".join(chunks)
        finally:
            close = getattr(chunks, "close", None)
            if close is not None:
                close()
        status, headers = started
        return Reply(int(status.split(" ", 1)[0]), tuple((k.lower(), v) for k, v in headers), body)

    return handle


def _no_write(data: bytes) -> None:
    msg = "the WSGI write() callable is not supported: return the body"
    raise RuntimeError(msg)


def environ(request: Request) -> dict[str, Any]:
    """The PEP 3333 environ of ``request``."""
    path, _, query = request.target.partition("?")
    env: dict[str, Any] = {
        "REQUEST_METHOD": request.method,
        "SCRIPT_NAME": "",
        "PATH_INFO": unquote_to_bytes(path).decode("latin-1"),
        "QUERY_STRING": query,
        "SERVER_NAME": request.server[0],
        "SERVER_PORT": str(request.server[1]),
        "SERVER_PROTOCOL": "HTTP/1.1",
        "REMOTE_ADDR": request.client[0] if request.client else "",
        "wsgi.version": (1, 0),
        "wsgi.url_scheme": request.scheme,
        "wsgi.input": io.BytesIO(request.body),
        "wsgi.errors": sys.stderr,
        "wsgi.multithread": True,
        "wsgi.multiprocess": False,
        "wsgi.run_once": False,
    }
    if request.body or request.method in ("POST", "PUT", "PATCH"):
        env["CONTENT_LENGTH"] = str(len(request.body))
    for name, value in request.headers:
        key = name.upper().replace("-", "_")
        if key == "CONTENT_LENGTH" or key == "TRANSFER_ENCODING":
            continue  # the body is whole: its length is set above
        key = key if key == "CONTENT_TYPE" else f"HTTP_{key}"
        env[key] = f"{env[key]},{value}" if key in env else value
    return env


def start_threads(pool: ThreadPoolExecutor, count: int, timeout: float = 30.0) -> int:
    """Start ``count`` threads of ``pool`` now, not one by one at the first peaks of load; return how many.

    A ``ThreadPoolExecutor`` starts a thread only when every one it has is busy, and keeps it: a gang
    whose members wait at the bind barrier takes a thread each, so the pool grew to each new peak over
    hours and the worker's memory with it (about 18 KiB a thread). Started at once, the memory a
    worker settles at is there from its first minute (a memory limit sized then holds), and no thread
    is created on the hot path in the middle of a burst. Each start task waits at a barrier until all
    ``count`` run, so the pool cannot reuse one thread for two of them. A process that may not start
    that many threads (a pids limit) serves with those it could start, as a lazy pool would have.
    """
    barrier = threading.Barrier(count, timeout=timeout)
    started = []
    for _ in range(count):
        try:
            started.append(pool.submit(barrier.wait))
        except RuntimeError:  # no more threads (a pids limit): serve with those there are
            barrier.abort()
            break
    running = 0
    for future in started:
        try:
            future.result()
            running += 1
        except threading.BrokenBarrierError:
            pass  # a pool smaller than asked: it still starts threads as it needs them
    return running


class FrontWorker(Worker):  # type: ignore[misc]  # gunicorn has no type hints
    """One gunicorn worker: an event loop reading requests, ``threads`` threads running the app."""

    def run(self) -> None:
        """Serve gunicorn's listening sockets until gunicorn stops the worker."""
        settings = ExtenderSettings.from_env(os.environ)
        limits = FrontLimits(
            max_body_bytes=settings.max_body_bytes,
            request_timeout=settings.request_read_timeout_seconds,
            idle_timeout=float(self.cfg.keepalive or 5),
            max_connections=self.cfg.worker_connections,
        )
        pool = ThreadPoolExecutor(max_workers=self.cfg.threads, thread_name_prefix="verb")
        start_threads(pool, self.cfg.threads)
        handler = front_handler(self.wsgi, wsgi_handler(self.wsgi))
        front = HttpFront(handler, pool, limits, json_refusal)
        try:
            asyncio.run(self._serve(front))
        finally:
            pool.shutdown(wait=False, cancel_futures=True)

    async def _serve(self, front: HttpFront) -> None:
        context = None
        if self.cfg.is_ssl:
            context = gunicorn_sock.ssl_context(self.cfg)
            context.set_alpn_protocols(["http/1.1"])  # this front speaks HTTP/1.1 only
        servers = [
            await asyncio.start_server(
                front.connected,
                sock=listener.sock,
                ssl=context,
                ssl_handshake_timeout=front.limits.request_timeout if context else None,
            )
            for listener in self.sockets
        ]
        while self.alive:
            self.notify()
            if self.ppid != os.getppid():
                self.log.info("Parent changed, shutting down: %s", self)
                break
            await asyncio.sleep(1.0)
        for server in servers:
            server.close()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.cfg.graceful_timeout
        while front.busy and loop.time() < deadline:  # requests being served finish (a bind's barrier)
            await asyncio.sleep(0.1)
        front.close_all()
