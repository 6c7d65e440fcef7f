"""The pin webhook: a worker of an elastic MPIJob is pinned as it is created, not after it waits.

Without it, a worker the operator creates (the job grew, or a moved worker came back) is first turned
down by the pool's pin taints, then pinned by the next pass (up to ``--interval-seconds`` later), then
retried by kube-scheduler. The API server calls this mutating webhook on every pod CREATE of a pod
labelled ``training.kubeflow.org/job-role=worker``; it answers with the toleration of the worker's node
in the plan the pass last wrote on the MPIJob (annotation ``phalanx.io/elastic-plan``), chosen by the
same rule the pass uses (``scheduling.elastic.pinning.choose_pins``) against the job's workers read from
the API server at that moment, so the two never disagree and nothing is remembered here.

It always allows the pod: with no plan, no room in it, a job that is not elastic, or any failure, the
pod is created unpinned and the pass pins it (the webhook configuration also says ``failurePolicy:
Ignore``). ``docs/elastic-mpijobs.md`` has the measured difference (creation to bound).

The same server answers the gate webhook on ``GATE_PATH`` (``GateAdmitter``): every pod of scheduler
``phalanx`` is created with the admission gate, released later by the leader's release pass
(``placement.gates``). Two webhook configurations, two paths: the pin one selects workers by label, the
gate one sees every pod, and a worker passes both.
"""

from __future__ import annotations

import logging
import socket
import sys
import threading
from collections.abc import Callable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol

from kubeio.admission import PodAdmission, ReviewError, allow, read_review
from kubeio.convert import ConvertError
from kubeio.errors import KubeError
from kubeio.gates import gate_ops, stamp_ops
from kubeio.mpijobs import JOB_NAME_LABEL, ROLE_LABEL, MpiJob, mpijob_ref, parse_plan, workers_of
from kubeio.pins import pin_toleration
from kubeio.ports import EventSink
from placement.serving_tls import ServingTls
from scheduling.elastic.pinning import choose_pins
from scheduling.model import Pod

log = logging.getLogger(__name__)

MUTATE_PATH = "/mutate-pods"
GATE_PATH = "/gate-pods"
MAX_BODY = 3 * 1024 * 1024
"""Largest review read (the API server's own request limit for an object is 3 MiB)."""


class JobReader(Protocol):
    """Reads an MPIJob and its workers from the API server (``kubeio.mpijobs.MpiJobWriter``)."""

    def get(self, namespace: str, name: str) -> MpiJob | None:
        """The MPIJob, or ``None``."""

    def workers(self, namespace: str, name: str) -> tuple[Pod, ...]:
        """Its worker pods, by replica index."""


class PinAdmitter:
    """Answers one admission review (no HTTP here, so it is tested directly)."""

    def __init__(
        self,
        jobs: JobReader,
        events: EventSink,
        *,
        effect: str,
        on_pin: Callable[[], None] = lambda: None,
    ) -> None:
        self._jobs = jobs
        self._events = events
        self._effect = effect
        self._on_pin = on_pin

    def admit(self, body: bytes) -> tuple[int, bytes]:
        """HTTP status and body answering ``body``; 400 with the reason for a body that is no review."""
        try:
            review = read_review(body)
        except ReviewError as exc:
            log.warning("pin webhook: %s", exc)
            return 400, str(exc).encode()
        try:
            node = self.pin_for(review)
        except (KubeError, ConvertError) as exc:
            log.info("pin webhook: %s not pinned at creation (%s); the pass pins it", review.pod.key, exc)
            node = None
        if node is None:
            return 200, allow(review.uid)
        self._on_pin()
        return 200, allow(
            review.uid,
            add_toleration=pin_toleration(node, self._effect),
            has_tolerations=review.has_tolerations,
        )

    def pin_for(self, review: PodAdmission) -> str | None:
        """The node the pod being created is pinned to, or ``None`` (not a planned worker, or no room).

        Raises:
            KubeError: the API server failed.
            ConvertError: the MPIJob has the wrong shape.
        """
        pod = review.pod
        job_name = pod.labels.get(JOB_NAME_LABEL)
        if job_name is None or pod.labels.get(ROLE_LABEL) != "worker" or pod.pinned or pod.tolerates_pool:
            return None
        job = self._jobs.get(pod.namespace, job_name)
        if job is None or not job.elastic:
            return None
        target = parse_plan(job.plan)
        if not target:
            return None
        others = [w for w in self._jobs.workers(pod.namespace, job_name) if w.name != pod.name]
        workers = workers_of(pod.namespace, job_name, [*others, pod])
        node = next((n for p, n in choose_pins(target, workers) if p.name == pod.name), None)
        if node is not None:
            self._events.record(
                mpijob_ref(job),
                "Normal",
                "Pinned",
                f"pinned {pod.name} to {node} as it was created: the layout of {job.key} puts a worker there",
            )
        return node


class GateAdmitter:
    """Answers the gate webhook: adds the admission gate to a pod of scheduler ``phalanx`` being created.

    Every pod of scheduler ``phalanx`` it answers for also gets the annotation ``phalanx.io/gate-webhook``:
    the release pass ungates pods, so only this stamp tells a released pod from one created around the
    webhook (``placement.gate_bypass``). With gates off (``--admission-gates=false``) it lets every pod
    through ungated and unstamped: nothing would release them.
    """

    def __init__(self, *, enabled: bool, on_gate: Callable[[], None] = lambda: None) -> None:
        self._enabled = enabled
        self._on_gate = on_gate

    def admit(self, body: bytes) -> tuple[int, bytes]:
        """HTTP status and body answering ``body``; 400 with the reason for a body that is no review."""
        try:
            review = read_review(body)
        except ReviewError as exc:
            log.warning("gate webhook: %s", exc)
            return 400, str(exc).encode()
        ops = gate_ops(review) if self._enabled else []
        if ops:
            self._on_gate()
        stamp = stamp_ops(review) if self._enabled else []
        return 200, allow(review.uid, patch=[*ops, *stamp])


Admit = Callable[[bytes], tuple[int, bytes]]
"""One webhook's answer to a review body: HTTP status and body."""


def serve_webhook(
    routes: Mapping[str, Admit], *, host: str, port: int, tls: ServingTls
) -> ThreadingHTTPServer:
    """Start serving ``routes`` (path to answer) over HTTPS on a daemon thread; ``shutdown()`` to stop.

    Every accepted connection is wrapped with ``tls``'s context of that moment, so a certificate
    reloaded by ``tls`` is served from the next connection on; while ``tls`` has none, connections are
    closed unanswered (the API server's call fails, and the webhook check says why).

    Raises:
        OSError: the port is taken.
    """

    class Server(ThreadingHTTPServer):
        daemon_threads = True

        def get_request(self) -> tuple[socket.socket, Any]:
            """Accept, and leave the TLS handshake to the connection's own thread (first read)."""
            conn, address = self.socket.accept()
            context = tls.context()
            if context is None:
                conn.close()
                msg = "no certificate to serve yet"
                raise OSError(msg)  # socketserver drops this connection and accepts the next
            return context.wrap_socket(conn, server_side=True, do_handshake_on_connect=False), address

        def handle_error(self, request: Any, client_address: Any) -> None:
            """A client that hangs up or refuses the certificate is one line, not a traceback.

            The API server refuses a certificate its caBundle does not verify on every call; the webhook
            check reports that once, with the reason (``placement.webhook_watch``).
            """
            error = sys.exc_info()[1]
            if isinstance(error, OSError):  # ssl.SSLError, ConnectionResetError, timeouts
                log.debug("webhook connection from %s failed: %s", client_address, error)
            else:
                super().handle_error(request, client_address)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        timeout = 15  # a connection idle this long is closed (the API server reconnects)

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            admit = routes.get(self.path.split("?")[0])
            if admit is None:
                self._reply(404, b"not found")
            elif not 0 < length <= MAX_BODY:
                self._reply(413 if length else 400, b"a review of at most 3 MiB is expected")
            else:
                self._reply(*admit(self.rfile.read(length)))

        def do_GET(self) -> None:
            self._reply(200 if self.path == "/healthz" else 404, b"ok" if self.path == "/healthz" else b"")

        def _reply(self, status: int, body: bytes) -> None:
            self.send_response(status)
            kind = "application/json" if status == 200 and body.startswith(b"{") else "text/plain"
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            log.debug("pin webhook: " + format, *args)

    server = Server((host, port), Handler)
    threading.Thread(target=server.serve_forever, name="pin-webhook", daemon=True).start()
    log.info("webhooks serving https://%s:%d %s", host, port, " ".join(sorted(routes)))
    return server
