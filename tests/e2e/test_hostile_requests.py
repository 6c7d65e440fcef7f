"""Hostile requests against the real extender and webhook processes of the test bed.

Every class of request the hostile-input run found mishandled is sent over a real socket to the running
processes (the extender under gunicorn, over HTTP or HTTPS as the test bed serves it; the placement
manager's webhooks over TLS signed by the cluster CA): slow clients that send half a request and stop,
names that are no Kubernetes names, a pod nested 255 deep, a malformed chunked body, a 1 MB node name,
a request with no candidate node, reviews with a non-object ``metadata`` or larger than 3 MiB, bodies
that are no review at all. Each gets 400 with a reason, or the protocol's answer; never a 500, a
dropped connection or a stall. Afterwards a normal 1-GPU pod binds, and both processes still run.
"""

from __future__ import annotations

import base64
import contextlib
import http.client
import socket
import ssl
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import orjson
import pytest
from localbed import Testbed
from workload import create_pod, gpu_pod, gpus_of, running, wait_pod

from tests.conftest import SHARED

FIXTURES = SHARED / "fixtures" / "extender" / "nodecache-true"
NODES = ["gpu-node-1", "gpu-node-2", "gpu-node-3"]
ANSWER_TIMEOUT = 15.0
"""Seconds a probe waits for its answer. It answers in milliseconds when slow clients take no thread; on
the unfixed server it never answers while they are connected, so this only has to be long enough for a
loaded machine."""


@dataclass(frozen=True)
class Endpoint:
    """Where a server listens, and the TLS context to reach it with (``None``: plain HTTP)."""

    host: str
    port: int
    context: ssl.SSLContext | None

    def connect(self, timeout: float = ANSWER_TIMEOUT) -> socket.socket:
        sock = socket.create_connection((self.host, self.port), timeout=timeout)
        if self.context is None:
            return sock
        return self.context.wrap_socket(sock, server_hostname=self.host)

    def send(self, raw: bytes, timeout: float = ANSWER_TIMEOUT) -> tuple[int, bytes]:
        """Send one raw HTTP/1.1 request; (status, body) of the answer (the connection is closed after)."""
        with self.connect(timeout) as sock:
            sock.sendall(raw)
            reply = http.client.HTTPResponse(sock)
            reply.begin()
            return reply.status, reply.read()

    def post(self, path: str, body: bytes, *, headers: str = "") -> tuple[int, bytes]:
        head = f"POST {path} HTTP/1.1\r\nHost: {self.host}\r\nContent-Type: application/json\r\n"
        head += f"Content-Length: {len(body)}\r\nConnection: close\r\n{headers}\r\n"
        return self.send(head.encode() + body)

    def get(self, path: str) -> tuple[int, bytes]:
        return self.send(f"GET {path} HTTP/1.1\r\nHost: {self.host}\r\nConnection: close\r\n\r\n".encode())


def _context(testbed: Testbed) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=str(testbed.cluster.ca_file))


def extender(testbed: Testbed) -> Endpoint:
    url = urlsplit(testbed.extender_url)
    assert url.hostname is not None and url.port is not None
    return Endpoint(url.hostname, url.port, _context(testbed) if url.scheme == "https" else None)


def webhook(testbed: Testbed) -> Endpoint:
    """The webhooks as the API server calls them, trusting the CA it trusts (``Testbed.webhook_context``)."""
    return Endpoint("127.0.0.1", testbed.webhook_port, testbed.webhook_context())


def captured(verb: str) -> dict[str, Any]:
    request: dict[str, Any] = orjson.loads((FIXTURES / f"{verb}.request.json").read_bytes())
    return request


def filter_request() -> dict[str, Any]:
    """The captured filter request, naming the test bed's nodes."""
    return {**captured("filter"), "NodeNames": NODES}


def review(obj: Any, uid: str = "0b6c1a52-hostile") -> bytes:
    """A review posted straight to the webhook, as a dry run.

    The gate webhook's door (which lets a pod that fits now in ungated) is not asked for a pod that will
    not be stored, so a readable pod is gated too.
    """
    return orjson.dumps(
        {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {
                "uid": uid,
                "kind": {"group": "", "version": "v1", "kind": "Pod"},
                "resource": {"group": "", "version": "v1", "resource": "pods"},
                "namespace": "default",
                "operation": "CREATE",
                "object": obj,
                "dryRun": True,
            },
        }
    )


def pod_object(**spec: Any) -> dict[str, Any]:
    pod = gpu_pod("hostile", 1)
    pod["spec"].update(spec)
    return pod


@contextlib.contextmanager
def slow_clients(
    endpoint: Endpoint, path: str, *, partial_headers: int, partial_bodies: int
) -> Iterator[int]:
    """Connections that send part of a request and stop: headers cut short, or a body cut short."""
    socks: list[socket.socket] = []
    try:
        for i in range(partial_headers + partial_bodies):
            sock = endpoint.connect()
            if i < partial_headers:
                sock.sendall(f"POST {path} HTTP/1.1\r\nHost: {endpoint.host}\r\nContent-Ty".encode())
            else:
                head = f"POST {path} HTTP/1.1\r\nHost: {endpoint.host}\r\nContent-Type: application/json\r\n"
                sock.sendall(f'{head}Content-Length: 100000\r\n\r\n{{"Pod": '.encode())
            socks.append(sock)
        yield len(socks)
    finally:
        for sock in socks:
            sock.close()


def timed(call: Any) -> tuple[float, Any]:
    start = time.monotonic()
    result = call()
    return time.monotonic() - start, result


def test_slow_clients_take_no_thread_from_filter_and_healthz(testbed: Testbed) -> None:
    ext = extender(testbed)
    with slow_clients(ext, "/filter", partial_headers=300, partial_bodies=60) as held:
        health_seconds, (health, _) = timed(lambda: ext.get("/healthz"))
        filter_seconds, (status, body) = timed(lambda: ext.post("/filter", orjson.dumps(filter_request())))
    print(f"extender with {held} slow clients: /healthz {health_seconds:.3f}s, /filter {filter_seconds:.3f}s")
    assert health == 200
    assert status == 200, body
    assert set(orjson.loads(body)["NodeNames"]) <= set(NODES)


def test_slow_clients_take_no_thread_from_the_webhooks(testbed: Testbed) -> None:
    hook = webhook(testbed)
    with slow_clients(hook, "/gate-pods", partial_headers=300, partial_bodies=60) as held:
        health_seconds, (health, _) = timed(lambda: hook.get("/healthz"))
        review_seconds, (status, body) = timed(lambda: hook.post("/gate-pods", review(pod_object())))
    print(f"webhook with {held} slow clients: /healthz {health_seconds:.3f}s, review {review_seconds:.3f}s")
    assert health == 200
    assert status == 200 and orjson.loads(body)["response"]["allowed"] is True


def deep(levels: int) -> bytes:
    return b'{"a":' * levels + b"null" + b"}" * levels


def _bind(**fields: str) -> bytes:
    return orjson.dumps({**captured("bind"), **fields})


def _with_deep_pod(verb: str) -> bytes:
    request = filter_request() if verb == "filter" else {**captured(verb), "NodeNames": NODES}
    request["Pod"]["spec"]["hostile"] = "DEEP"
    return orjson.dumps(request).replace(b'"DEEP"', deep(255))


HUGE = "n" * 1_000_000
EXTENDER_CASES = {
    "bind, '..' namespace": ("/bind", _bind(PodNamespace=".."), "PodNamespace"),
    "bind, '/' in the name": ("/bind", _bind(PodName="a/b"), "PodName"),
    "bind, a 1 MB node name": ("/bind", _bind(Node=HUGE), "Node"),
    "filter, a 1 MB node name": (
        "/filter",
        orjson.dumps({**filter_request(), "NodeNames": [HUGE]}),
        "NodeNames",
    ),
    "filter, a pod nested 255 deep": ("/filter", _with_deep_pod("filter"), "re-encoded"),
    "prioritize, a pod nested 255 deep": ("/prioritize", _with_deep_pod("prioritize"), "re-encoded"),
    "filter, Nodes.items null": (
        "/filter",
        orjson.dumps({**filter_request(), "NodeNames": None, "Nodes": {"items": None}}),
        "no candidate node",
    ),
    "prioritize, NodeNames empty": (
        "/prioritize",
        orjson.dumps({**captured("prioritize"), "NodeNames": [], "Nodes": None}),
        "no candidate node",
    ),
}


@pytest.mark.parametrize(("path", "body", "named"), EXTENDER_CASES.values(), ids=EXTENDER_CASES.keys())
def test_a_malformed_extender_request_gets_400_with_a_short_reason(
    testbed: Testbed, path: str, body: bytes, named: str
) -> None:
    log = testbed.logs / "extender.log"
    before = log.stat().st_size
    status, reply = extender(testbed).post(path, body)
    assert status == 400, reply[:300]
    reason = orjson.loads(reply)["Error"]
    assert named in reason and len(reason) < 500, reason[:600]
    assert log.stat().st_size - before < 20_000, "a refused request's value is not logged in full"


def test_a_malformed_chunked_body_gets_400_with_a_reason(testbed: Testbed) -> None:
    ext = extender(testbed)
    head = (
        f"POST /bind HTTP/1.1\r\nHost: {ext.host}\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
    )
    status, reply = ext.send(head.encode() + b"zz\r\n" + _bind()[:10] + b"\r\n0\r\n\r\n")
    assert status == 400 and "chunk" in orjson.loads(reply)["Error"]
    status, reply = webhook(testbed).send(
        head.replace("/bind", "/gate-pods").encode() + b"zz\r\n{}\r\n0\r\n\r\n"
    )
    assert status == 400 and b"chunk" in reply


def _answer(body: bytes) -> dict[str, Any]:
    response: dict[str, Any] = orjson.loads(body)["response"]
    assert response["uid"] == "0b6c1a52-hostile" and response["allowed"] is True
    return response


def _gated(response: dict[str, Any]) -> bool:
    patch = orjson.loads(base64.b64decode(response["patch"])) if "patch" in response else []
    return any(op["path"].startswith("/spec/schedulingGates") for op in patch)


REVIEWS = {
    "a non-object metadata": review({**pod_object(), "metadata": "hostile"}),
    "a field phalanx cannot read": review(pod_object(priority="high")),
    "a review above 3 MiB": review(
        pod_object(containers=[{"name": "c", "env": [{"name": "X", "value": "<" * 3_300_000}]}])
    ),
}


@pytest.mark.parametrize("body", REVIEWS.values(), ids=REVIEWS.keys())
def test_a_review_of_any_pod_is_answered_allowed_and_gated_when_gates_are_on(
    testbed: Testbed, body: bytes
) -> None:
    hook = webhook(testbed)
    status, reply = hook.post("/gate-pods", body)
    assert status == 200, reply[:300]
    assert _gated(_answer(reply)) == testbed.admission_gates
    status, reply = hook.post("/mutate-pods", body)
    assert status == 200, reply[:300]
    _answer(reply)


UNREADABLE = {
    "not JSON": b"{not json",
    "a list": b"[]",
    "an object that is no pod": review([1, 2]),
    "nested 100,000 deep": deep(100_000),
    "no request": b'{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}',
}


@pytest.mark.parametrize("path", ["/gate-pods", "/mutate-pods"])
@pytest.mark.parametrize("body", UNREADABLE.values(), ids=UNREADABLE.keys())
def test_a_body_that_is_no_review_gets_400_with_a_reason(testbed: Testbed, path: str, body: bytes) -> None:
    status, reply = webhook(testbed).post(path, body)
    assert status == 400 and reply and len(reply) < 1000, reply[:300]


def test_after_the_storm_a_pod_binds_and_both_processes_run(testbed: Testbed, namespace: str) -> None:
    test_slow_clients_take_no_thread_from_filter_and_healthz(testbed)
    for path, body, _ in EXTENDER_CASES.values():
        extender(testbed).post(path, body)
    for body in [*REVIEWS.values(), *UNREADABLE.values()]:
        webhook(testbed).post("/gate-pods", body)
    create_pod(testbed.http, namespace, gpu_pod("after-storm", 1))
    pod = wait_pod(testbed.http, namespace, "after-storm", "running", running, timeout=60)
    assert len(gpus_of(pod)) == 1
    assert testbed.is_running("extender") and testbed.is_running("placement")
