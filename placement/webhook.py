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

The same server answers the gate webhook on ``GATE_PATH`` (``GateWebhook``): every pod of scheduler
``phalanx`` is created with the admission gate, released later by the leader's release pass
(``placement.release_pass``), unless the leader's door lets it in as it is created (a pod on its own the
pass would release now and alone: ``scheduling.admission.door``). Two webhook
configurations, two paths: the pin one selects workers by label, the
gate one sees every pod, and a worker passes both. Both configurations say ``failurePolicy: Ignore``, so
a review either webhook refuses lets the pod in as it is: the gate webhook gates every pod the API server
can send, reading only what gating decides on (``kubeio.webhook_review.read_gate_review``), the pin webhook
allows a pod it cannot read, unpinned, and only a body that is no AdmissionReview of a pod gets 400.

The server is ``kubeio.serving``'s front on its own event loop thread: the API server's requests are
read in full there (TLS handshake, headers and body, each within a deadline) and only then answered by
one of ``WEBHOOK_THREADS`` threads, so clients that open connections and send half a request take no
thread and cannot delay a review (a thread per connection, as ``ThreadingHTTPServer`` gives, is
unbounded). A body may be up to ``MAX_BODY``.
"""

from __future__ import annotations

import logging
import ssl
from collections.abc import Callable, Mapping

from kubeio.convert import ConvertError
from kubeio.errors import KubeError
from kubeio.gate_patches import gate_ops, stamp_ops
from kubeio.mpijob_pods import JOB_NAME_LABEL, ROLE_LABEL, workers_of
from kubeio.mpijobs import mpijob_ref, parse_plan
from kubeio.pins import pin_toleration
from kubeio.ports import EventSink, JobReader
from kubeio.serving import BackgroundServer, FrontLimits, Reply, Request, serve_in_thread
from kubeio.webhook_review import PodReview, ReviewError, allow, read_gate_review, read_review
from placement.serving_tls import ServingTls
from scheduling.elastic.pinning import choose_pins
from scheduling.model import Pod

log = logging.getLogger(__name__)

MUTATE_PATH = "/mutate-pods"
GATE_PATH = "/gate-pods"
MAX_BODY = 20 * 1024 * 1024
"""Largest review read. The API server accepts an object of up to 3 MiB of JSON, and the review it
sends wraps the object as its own encoder writes it, which may spell one byte of a string as a 6-byte
escape (``\u003c``): 6 x 3 MiB, and room for the review around it."""

WEBHOOK_THREADS = 16
"""Reviews answered at once. A review is answered in milliseconds (the pin webhook reads an MPIJob and
its workers); only whole requests reach a thread."""

LIMITS = FrontLimits(max_body_bytes=MAX_BODY, request_timeout=10.0, idle_timeout=60.0, max_connections=1000)
"""The webhook server's bounds (``kubeio.serving``): the API server calls with a 10 s timeout by
default and keeps connections alive between reviews."""


class PinWebhook:
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

    def review(self, body: bytes) -> tuple[int, bytes]:
        """HTTP status and body answering ``body``; 400 with the reason for a body that is no review.

        A review of a pod that phalanx cannot read is allowed unpinned, as a failure is: the API server
        sent it, so it is a pod, and refusing it would let it in all the same (``failurePolicy: Ignore``).
        """
        try:
            gate = read_gate_review(body)
        except ReviewError as exc:
            log.warning("pin webhook: %s", exc)
            return 400, str(exc).encode()
        try:
            review = read_review(body)
        except ReviewError as exc:
            log.info("pin webhook: review %s allowed unpinned: %s", gate.uid[:100], exc)
            return 200, allow(gate.uid)
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

    def pin_for(self, review: PodReview) -> str | None:
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


class GateWebhook:
    """Answers the gate webhook: adds the admission gate to a pod of scheduler ``phalanx`` being created.

    Every pod of scheduler ``phalanx`` it answers for also gets the annotation ``phalanx.io/gate-webhook``:
    the release pass ungates pods, so only this stamp tells a released pod from one created around the
    webhook (``placement.bypass_pass``). With gates off (``--admission-gates=false``) it lets every pod
    through ungated and unstamped: nothing would release them.
    """

    def __init__(
        self,
        *,
        enabled: bool,
        door: Door | None = None,
        on_gate: Callable[[], None] = lambda: None,
    ) -> None:
        self._enabled = enabled
        self._door = door
        self._on_gate = on_gate

    def review(self, body: bytes) -> tuple[int, bytes]:
        """HTTP status and body answering ``body``; 400 with the reason for a body that is no review.

        A pod the door lets in (``ReleasePass.admit``: it would be released now) is stamped, not gated,
        with the annotations the door gives it (its plan, when plans are carried on pods).
        A dry run is never asked at the door: the door counts the pod in flight, and a dry run stores
        nothing (the configuration says ``sideEffects: NoneOnDryRun``).
        """
        try:
            review = read_gate_review(body)
        except ReviewError as exc:
            log.warning("gate webhook: %s", exc)
            return 400, str(exc).encode()
        ops = gate_ops(review) if self._enabled else []
        given: Mapping[str, str] = {}
        if ops and self._door is not None and not review.dry_run:
            let_in = _let_in(self._door, body)
            if let_in is not None:
                ops, given = [], let_in
        if ops:
            self._on_gate()
        stamp = stamp_ops(review, given) if self._enabled else []
        return 200, allow(review.uid, patch=[*ops, *stamp])


Door = Callable[[Pod], Mapping[str, str] | None]
"""Whether a pod being created goes in ungated (``placement.release_pass.ReleasePass.admit``): ``None``
gates it; else the annotations to give it as it goes in (none, or its carried plan)."""


def _let_in(door: Door, body: bytes) -> Mapping[str, str] | None:
    """What ``door`` says of the pod of ``body``: ``None`` gates it (so does a pod phalanx cannot read).

    A door that fails gates the pod, logged: the pass then decides. Let through, the failure would
    answer the API server with an error, and ``failurePolicy: Ignore`` would create the pod ungated and
    unstamped, outside the fair order.
    """
    try:
        pod = read_review(body).pod
    except ReviewError as exc:
        log.debug("gate webhook: gated at the door: %s", exc)
        return None
    try:
        return door(pod)
    except Exception:  # a bug in the door: the gate, as without it
        log.exception("gate webhook: the door failed on %s; gated", pod.key)
        return None


Admit = Callable[[bytes], tuple[int, bytes]]
"""One webhook's answer to a review body: HTTP status and body."""


def serve_webhook(routes: Mapping[str, Admit], *, host: str, port: int, tls: ServingTls) -> BackgroundServer:
    """Start serving ``routes`` (path to answer) over HTTPS on a daemon thread; ``shutdown()`` to stop.

    Every TLS handshake is served with ``tls``'s context of that moment (``front_context``), so a
    certificate reloaded by ``tls`` is served from the next connection on; while ``tls`` has none, the
    handshake is refused (the API server's call fails, and the webhook check says why).

    Raises:
        OSError: the port is taken.
    """

    def handle(request: Request) -> Reply:
        path = request.target.split("?")[0]
        if request.method == "GET":
            return _reply(200, b"ok") if path == "/healthz" else _reply(404, b"not found")
        admit = routes.get(path)
        if request.method != "POST" or admit is None:
            return _reply(404, b"not found")
        if not request.body:
            return _reply(400, b"an AdmissionReview is expected in the body")
        return _reply(*admit(request.body))

    context = front_context(tls)
    server = serve_in_thread(
        handle, host=host, port=port, limits=LIMITS, threads=WEBHOOK_THREADS, context=context, name="webhook"
    )
    log.info("webhooks serving https://%s:%d %s", host, server.server_address[1], " ".join(sorted(routes)))
    return server


def front_context(tls: ServingTls) -> ssl.SSLContext:
    """A server context that hands each handshake to ``tls``'s context of that moment.

    The event loop of ``kubeio.serving`` wraps every connection with one context, given at start. Its
    server-name callback runs for every ClientHello, with or without SNI (the API server sends none when
    it calls a webhook by IP URL), before a certificate is chosen, and switches the connection to the
    current context; without one yet, the handshake ends with an alert.
    """
    front = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    front.minimum_version = ssl.TLSVersion.TLSv1_2

    def choose(connection: ssl.SSLObject, _name: str | None, _front: ssl.SSLContext) -> int | None:
        current = tls.context()
        if current is None:
            return ssl.ALERT_DESCRIPTION_INTERNAL_ERROR
        connection.context = current
        return None

    front.sni_callback = choose
    return front


def _reply(status: int, body: bytes) -> Reply:
    kind = "application/json" if status == 200 and body.startswith(b"{") else "text/plain; charset=utf-8"
    return Reply(status, (("content-type", kind),), body)
