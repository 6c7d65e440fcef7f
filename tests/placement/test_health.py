"""``/readyz``, ``/healthz`` and ``/metrics`` on the placement manager's metrics port, over real HTTP."""

from __future__ import annotations

import urllib.error
import urllib.request

from prometheus_client import CollectorRegistry, Counter

from placement.health import serve_health


def get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as reply:
            return reply.status, reply.read().decode()
    except urllib.error.HTTPError as exc:
        with exc:
            return exc.code, exc.read().decode()


def test_readyz_fails_with_every_reason_and_passes_without_one() -> None:
    registry = CollectorRegistry()
    Counter("phalanx_example", "An example.", registry=registry).inc()
    reasons: list[str] = ["the gate webhook cannot be called"]
    server = serve_health(
        0, registry, [lambda: list(reasons), lambda: ["pod ml/a bypassed the gate"]], host="127.0.0.1"
    )
    port = int(server.server_address[1])
    try:
        assert get(port, "/readyz") == (
            503,
            "the gate webhook cannot be called\npod ml/a bypassed the gate\n",
        )
        assert get(port, "/healthz") == (200, "ok\n")
        status, page = get(port, "/metrics")
        assert status == 200 and "phalanx_example_total 1.0" in page
        server_two = serve_health(0, registry, [], host="127.0.0.1")
        try:
            assert get(int(server_two.server_address[1]), "/readyz") == (200, "ok\n")
        finally:
            server_two.shutdown()
            server_two.server_close()
    finally:
        server.shutdown()
        server.server_close()
