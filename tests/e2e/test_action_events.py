"""An action's event survives a crash of the placement manager right after the action.

Events used to be queued and written by a background thread after the action: killed in between, the
manager lost the event for good, and its successor, finding nothing left to do, never wrote it. Here a
validating webhook on Events holds the write of one ``GangEvicted`` event for a few seconds, which
stretches that gap; the manager is SIGKILLed the moment the eviction is seen. The event must be there:
written before the deletions (``EventRecorder.record_now``), it is the eviction that waits.
"""

from __future__ import annotations

import base64
import contextlib
import json
import signal
import ssl
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from localbed import Testbed, free_port
from localcluster.pki import ensure_serving_cert
from workload import (
    create_pod,
    create_podgroup,
    events_for,
    get_pod,
    get_podgroup,
    member,
    podgroup,
    wait_for,
)

from kubeio.errors import NotFoundError

HOLD_SECONDS = 4.0
"""How long the webhook holds the write of a ``GangEvicted`` event: far longer than the test needs to
see the eviction and kill the manager."""

CONFIGS = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations"
NAME = "phalanx-e2e-event-hold"


class _Hold(BaseHTTPRequestHandler):
    """Admits every Event; holds each ``GangEvicted`` one ``HOLD_SECONDS`` first."""

    held: list[str]

    def do_POST(self) -> None:
        review: dict[str, Any] = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        request = review["request"]
        event = request.get("object") or {}
        if event.get("reason") == "GangEvicted":
            self.held.append(str(event.get("message")))
            time.sleep(HOLD_SECONDS)
        answer = {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "response": {"uid": request["uid"], "allowed": True},
        }
        body = json.dumps(answer).encode()
        with contextlib.suppress(OSError):  # the API server may have given up on a canceled request
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        return


@pytest.fixture
def held_events(testbed: Testbed, namespace: str) -> Iterator[list[str]]:
    """A webhook holding ``GangEvicted`` Events of ``namespace``; yields the messages it held."""
    key, crt = ensure_serving_cert(
        testbed.cluster.ca_file.parent, "event-hold", "/CN=event-hold", ("IP:127.0.0.1",)
    )
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(str(crt), str(key))
    held: list[str] = []
    handler = type("Hold", (_Hold,), {"held": held})
    port = free_port()
    server = ThreadingHTTPServer(("127.0.0.1", port), handler)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    webhook = {
        "name": "hold.events.phalanx.io",
        "clientConfig": {
            "url": f"https://127.0.0.1:{port}/",
            "caBundle": base64.b64encode(testbed.cluster.ca_file.read_bytes()).decode(),
        },
        "rules": [
            {"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["events"]}
        ],
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
        "failurePolicy": "Fail",
        "sideEffects": "None",
        "admissionReviewVersions": ["v1"],
        "timeoutSeconds": 15,
    }
    body = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration"}
    testbed.http.request("POST", CONFIGS, body={**body, "metadata": {"name": NAME}, "webhooks": [webhook]})
    try:
        yield held
    finally:
        with contextlib.suppress(NotFoundError):
            testbed.http.request("DELETE", f"{CONFIGS}/{NAME}")
        server.shutdown()
        server.server_close()


def test_a_gang_evictions_event_survives_a_sigkill_right_after_the_eviction(
    testbed: Testbed, namespace: str, held_events: list[str]
) -> None:
    create_podgroup(testbed.http, namespace, podgroup("g", 2))
    for i in range(2):
        create_pod(testbed.http, namespace, member(f"g-{i}", "g", 1))
    wait_for(  # placed: only a placed gang that lost a member is evicted (its status says so)
        "the gang running",
        lambda: get_podgroup(testbed.http, namespace, "g").get("status", {}).get("phase") == "Running",
        timeout=60,
    )

    time.sleep(0.5)  # the webhook registered above is in force in the API server (its informer)
    testbed.http.request(
        "DELETE", f"/api/v1/namespaces/{namespace}/pods/g-1", body={"gracePeriodSeconds": 0}
    )  # lost: after the 3 s grace the manager evicts g-0

    def evicted() -> bool:
        with contextlib.suppress(NotFoundError):
            return bool(get_pod(testbed.http, namespace, "g-0")["metadata"].get("deletionTimestamp"))
        return True

    wait_for("g-0 evicted", evicted, timeout=testbed.placement_grace + 30, interval=0.02)
    testbed.kill_placement(signal.SIGKILL)
    killed_at = time.monotonic()
    try:
        assert held_events, "the eviction's event was on its way (the webhook saw it)"
        reasons = wait_for(
            "the GangEvicted event",
            lambda: [e for e in events_for(testbed.http, namespace, "g") if e["reason"] == "GangEvicted"],
            timeout=HOLD_SECONDS + 10,
        )
        print(f"{reasons[0]['message']} (found {time.monotonic() - killed_at:.1f}s after the kill)")
    finally:
        testbed.start_placement()
