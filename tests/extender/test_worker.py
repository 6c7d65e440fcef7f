"""The extender's gunicorn worker: the Flask app behind ``kubeio.serving``'s front.

The real extender app (over the in-memory cluster of ``appkit``) is served through the front as the
worker serves it and answers over real sockets exactly as the Flask test client sees it; and gunicorn
itself, started with the extender's settings (``extender.gunicorn_conf``), keeps answering ``/healthz``
while more clients than it has threads hold half a request, where its ``gthread`` worker did not.
"""

from __future__ import annotations

import http.client
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import orjson
import pytest

from extender.worker import environ, json_refusal, start_threads, wsgi_handler
from kubeio.serving import BackgroundServer, FrontLimits, Request, serve_in_thread
from tests.conftest import REPO, SHARED
from tests.extender.appkit import fixture_cluster, make_app

FIXTURES = SHARED / "fixtures" / "extender" / "nodecache-true"
WAIT = 15.0


def exchange(port: int, raw: bytes) -> tuple[int, bytes]:
    with socket.create_connection(("127.0.0.1", port), timeout=WAIT) as sock:
        sock.sendall(raw)
        reply = http.client.HTTPResponse(sock)
        reply.begin()
        return reply.status, reply.read()


def post(path: str, body: bytes) -> bytes:
    head = f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {len(body)}"
    return head.encode() + b"\r\n\r\n" + body


@pytest.fixture
def served() -> Iterator[tuple[BackgroundServer, Any]]:
    app, *_ = make_app(fixture_cluster(SHARED))
    server = serve_in_thread(
        wsgi_handler(app),
        host="127.0.0.1",
        port=0,
        limits=FrontLimits(max_body_bytes=1 << 20),
        threads=4,
        refuse=json_refusal,
    )
    try:
        yield server, app
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("verb", ["filter", "prioritize", "bind", "preempt"])
def test_every_verb_answers_over_the_front_as_the_app_answers(
    served: tuple[BackgroundServer, Any], verb: str
) -> None:
    server, _ = served
    body = (FIXTURES / f"{verb}.request.json").read_bytes()
    status, reply = exchange(server.server_address[1], post(f"/{verb}", body))
    app, *_ = make_app(fixture_cluster(SHARED))  # a fresh app: the same state the served one started with
    expected = app.test_client().post(f"/{verb}", data=body, content_type="application/json")
    assert (status, orjson.loads(reply)) == (expected.status_code, orjson.loads(expected.data))


def test_a_query_string_and_a_refusal_keep_the_extender_shapes(served: tuple[BackgroundServer, Any]) -> None:
    server, _ = served
    port = server.server_address[1]
    status, reply = exchange(port, b"GET /debug/decision?pod=gpu-test/x HTTP/1.1\r\nHost: x\r\n\r\n")
    assert status == 404 and "'gpu-test/x'" in orjson.loads(reply)["Error"]
    raw = b"POST /bind HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n"
    status, reply = exchange(port, raw)
    assert status == 400 and orjson.loads(reply)["Error"].startswith("malformed HTTP request: ")


def test_the_environ_is_pep_3333() -> None:
    request = Request(
        method="POST",
        target="/a%20b?x=1&y=%2F",
        headers=(
            ("content-type", "application/json"),
            ("x-two", "1"),
            ("x-two", "2"),
            ("content-length", "9"),
        ),
        body=b"{}",
        client=("10.0.0.1", 5555),
        server=("127.0.0.1", 8888),
        scheme="https",
    )
    env = environ(request)
    assert (env["PATH_INFO"], env["QUERY_STRING"]) == ("/a b", "x=1&y=%2F")
    assert (env["CONTENT_TYPE"], env["CONTENT_LENGTH"], env["HTTP_X_TWO"]) == ("application/json", "2", "1,2")
    assert (env["SERVER_PORT"], env["REMOTE_ADDR"], env["wsgi.url_scheme"]) == ("8888", "10.0.0.1", "https")
    assert env["wsgi.input"].read() == b"{}"


def _gunicorn(port: int, worker: str | None) -> subprocess.Popen[bytes]:
    argv = [sys.executable, "-m", "gunicorn", "--config", "python:extender.gunicorn_conf"]
    argv += [
        *(["--worker-class", worker] if worker else []),
        "--threads",
        "8",
        "tests.extender.probe_app:app",
    ]
    env = {**os.environ, "PHALANX_PORT": str(port), "PHALANX_BIND_ADDRESS": "127.0.0.1"}
    return subprocess.Popen(argv, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _healthz_beside_slow_clients(port: int, proc: subprocess.Popen[bytes]) -> int | None:
    """The status of ``/healthz`` while 20 clients (more than the 8 threads) hold half a request."""
    deadline = time.monotonic() + 60
    while True:  # wait until gunicorn serves
        try:
            exchange(port, b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            break
        except OSError:
            assert proc.poll() is None and time.monotonic() < deadline, "gunicorn did not start"
            time.sleep(0.2)
    slow = [socket.create_connection(("127.0.0.1", port), timeout=WAIT) for _ in range(20)]
    try:
        for sock in slow:
            sock.sendall(b"POST /filter HTTP/1.1\r\nHost: x\r\nContent-Ty")
        time.sleep(0.5)  # let the server take them (a gthread worker gives each a thread)
        try:
            return exchange(port, b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")[0]
        except TimeoutError:
            return None
    finally:
        for sock in slow:
            sock.close()


@pytest.mark.parametrize(
    ("worker", "answers"), [(None, True), ("gthread", False)], ids=["shipped", "gthread"]
)
def test_gunicorn_answers_healthz_while_slow_clients_outnumber_its_threads(
    worker: str | None, answers: bool
) -> None:
    port = _free_port()
    proc = _gunicorn(port, worker)
    try:
        status = _healthz_beside_slow_clients(port, proc)
        assert (status == 200) is answers, f"{worker or 'the shipped worker'}: /healthz answered {status}"
    finally:
        proc.terminate()
        proc.wait(30)


def test_every_thread_of_the_pool_starts_at_once() -> None:
    """A pool left to itself starts a thread per new peak of load; the worker starts all of them first."""
    pool = ThreadPoolExecutor(max_workers=8, thread_name_prefix="t-start")
    try:
        assert start_threads(pool, 8) == 8
        assert sum(1 for t in threading.enumerate() if t.name.startswith("t-start")) == 8
        lazy = ThreadPoolExecutor(max_workers=8, thread_name_prefix="t-lazy")
        lazy.submit(int).result()
        assert sum(1 for t in threading.enumerate() if t.name.startswith("t-lazy")) == 1, "what it replaces"
        lazy.shutdown()
    finally:
        pool.shutdown()
    limited = ThreadPoolExecutor(max_workers=8)
    real_submit = limited.submit
    submitted: list[Any] = []

    def submit(fn: Any, /, *args: Any) -> Any:  # the fourth thread cannot start: a pids limit
        if len(submitted) == 3:
            msg = "can't start new thread"
            raise RuntimeError(msg)
        submitted.append(fn)
        return real_submit(fn, *args)

    limited.submit = submit  # type: ignore[method-assign,assignment]
    try:
        assert start_threads(limited, 8, timeout=5.0) == 0, "the start gives up at once, without a hang"
    finally:
        limited.shutdown()
    small = ThreadPoolExecutor(max_workers=2)
    try:
        assert start_threads(small, 4, timeout=0.2) == 0, "a pool smaller than asked does not hang the start"
    finally:
        small.shutdown()
