"""The visibility endpoint: ``phalanx why`` for a user who may read only their own namespace.

``phalanx why`` reads the whole cluster, which a team member with a namespace Role cannot. The placement
manager can, so it answers for them, over HTTPS beside its webhooks (same certificate):

    GET /why/namespaces/NS/pods/NAME          Authorization: Bearer TOKEN
    GET /why/namespaces/NS/podgroups/NAME

Each question is authorised as the API server would: a TokenReview says who holds the token, and a
SubjectAccessReview whether they may ``get`` that pod (or PodGroup) in that namespace. The answer is
the document ``phalanx why -o json`` prints (``scheduling.explain.explanation_json``), computed by the same
core on this replica's cache, with other namespaces' groups not named (``scheduling.explain.visible``), and
the (kind, name) of the objects whose Events explain it, which the caller lists in their own namespace.
Kueue answers the same need with its visibility API (an aggregated API server that also delegates
authentication and authorization to the API server); phalanx serves it directly, so it needs no
APIService and no front-proxy certificates. Every refusal says why: 401 without an accepted token, 403
with the API server's reason, 404 for a target that does not exist, 400 for a path it does not know,
429 when one user asks more than 30 questions a minute (``QuestionLimit``).
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import orjson

from kubeio.access_review import authenticate, may
from kubeio.errors import KubeError
from kubeio.http import JsonRequester
from kubeio.serving import BackgroundServer, FrontLimits, Reply, Request, serve_in_thread
from placement.placement_settings import PlacementSettings
from placement.serving_tls import ServingTls
from placement.webhook import front_context
from scheduling.cluster.snapshot import ClusterSnapshot
from scheduling.explain import ExplainError, Target, explain
from scheduling.explain.explanation_json import about, explanation_item
from scheduling.explain.visible import for_namespace

log = logging.getLogger(__name__)

API_VERSION = "phalanx.io/cli/v1"
"""The answer's apiVersion: that of every document ``phalanx`` prints (``cli.output.API_VERSION``)."""

PATH = re.compile(r"^/why/namespaces/([a-z0-9]([-a-z0-9]*[a-z0-9])?)/(pods|podgroups)/([^/?]+)$")
"""``/why/namespaces/NS/pods/NAME`` or ``.../podgroups/NAME``."""

RESOURCES = {"pods": ("", "pod"), "podgroups": ("scheduling.x-k8s.io", "podgroup")}
"""Path resource -> (API group the access review names, ``Target.kind``)."""

LIMITS = FrontLimits(max_body_bytes=1024, request_timeout=10.0, idle_timeout=60.0, max_connections=200)
THREADS = 4
"""Questions answered at once: each explains on the whole cluster, in the process that places pods."""

QUESTIONS_PER_MINUTE = 30.0
QUESTION_BURST = 10
"""Each user may ask this many questions a minute, this many at once: a script asking in a loop must not
take the placement manager's CPU from everyone else's pods (nor the 4 threads from other users)."""

MAX_USERS_KEPT = 10_000
"""Users remembered before those whose buckets have filled up again are forgotten."""


class QuestionLimit:
    """A token bucket per user: ``burst`` questions at once, refilled at ``per_minute`` a minute."""

    def __init__(self, per_minute: float, burst: int, clock: Callable[[], float]) -> None:
        self._rate = per_minute / 60.0
        self._burst = float(burst)
        self._clock = clock
        self._buckets: dict[str, tuple[float, float]] = {}
        self._lock = threading.Lock()

    def take(self, user: str) -> float:
        """Take one question for ``user``: 0 when they may ask now, else the seconds until they may."""
        with self._lock:
            now = self._clock()
            tokens, since = self._buckets.get(user, (self._burst, now))
            tokens = min(self._burst, tokens + (now - since) * self._rate)
            if tokens < 1.0:
                self._buckets[user] = (tokens, now)
                return (1.0 - tokens) / self._rate
            self._buckets[user] = (tokens - 1.0, now)
            if len(self._buckets) > MAX_USERS_KEPT:  # forget the users whose buckets are full again
                full = now - self._burst / self._rate
                self._buckets = {u: b for u, b in self._buckets.items() if b[1] > full}
            return 0.0


@dataclass(frozen=True, slots=True)
class Question:
    """One question: what is asked about, and the API group and resource the caller must be allowed."""

    target: Target
    group: str
    resource: str


def parse(path: str) -> Question | None:
    """The question a request path asks, or ``None`` when it is not one.

    >>> parse("/why/namespaces/team-a/pods/train-0").target
    Target(kind='pod', namespace='team-a', name='train-0')
    >>> parse("/why/namespaces/team-a/secrets/x") is None
    True
    """
    match = PATH.match(path)
    if match is None:
        return None
    namespace, _, resource, name = match.groups()
    group, kind = RESOURCES[resource]
    return Question(Target(kind, namespace, name), group, resource)


class Visibility:
    """Answers questions, each authorised for its caller by the API server."""

    def __init__(
        self,
        http: JsonRequester,
        snapshot: Callable[[], ClusterSnapshot],
        clock: Callable[[], float],
        limit: QuestionLimit,
    ) -> None:
        self._http = http
        self._snapshot = snapshot
        self._clock = clock
        self._limit = limit

    def answer(self, request: Request) -> Reply:
        """The reply to one request (never raises: every failure is a status with a reason)."""
        path = request.target.split("?")[0]
        if request.method == "GET" and path == "/healthz":
            return _text(200, "ok")
        question = parse(path)
        if request.method != "GET" or question is None:
            return _text(400, "ask GET /why/namespaces/NAMESPACE/pods/NAME or .../podgroups/NAME")
        token = _bearer(request)
        if not token:
            return _text(401, "send your Kubernetes bearer token (Authorization: Bearer ...)")
        try:
            return self._authorised(question, token)
        except KubeError as exc:
            log.warning("visibility: cannot review %s: %s", question.target.key, exc)
            return _text(503, f"the placement manager cannot ask the API server now: {exc.message}")

    def _authorised(self, question: Question, token: str) -> Reply:
        caller = authenticate(self._http, token)
        if caller is None:
            return _text(401, "the API server does not accept this token")
        wait = self._limit.take(caller.username)
        if wait:
            message = (
                f"too many questions from {caller.username}: at most {QUESTIONS_PER_MINUTE:.0f} a minute; "
                f"ask again in {wait:.0f} s"
            )
            return Reply(
                429,
                (("content-type", "text/plain; charset=utf-8"), ("retry-after", f"{wait:.0f}")),
                message.encode(),
            )
        target = question.target
        verdict = may(
            self._http,
            caller,
            verb="get",
            resource=question.resource,
            group=question.group,
            namespace=target.namespace,
            name=target.name,
        )
        if not verdict.allowed:
            why = f": {verdict.reason}" if verdict.reason else ""
            what = f"{question.resource}.{question.group}" if question.group else question.resource
            message = (
                f'{caller.username} may not get {what} "{target.name}" in namespace {target.namespace}{why}'
            )
            return _text(403, message)
        snapshot = self._snapshot()
        try:
            said = explain(snapshot, target, now=self._clock())
        except ExplainError as exc:
            return _text(404, str(exc))
        document = {
            "apiVersion": API_VERSION,
            "kind": "Explanation",
            "target": {"kind": target.kind, "namespace": target.namespace, "name": target.name},
            **explanation_item(for_namespace(said, target.namespace)),
            "about": [list(pair) for pair in sorted(about(target, snapshot))],
        }
        log.info("visibility: answered %s about %s %s", caller.username, target.kind, target.key)
        return Reply(200, (("content-type", "application/json"),), orjson.dumps(document))


def _bearer(request: Request) -> str:
    for name, value in request.headers:
        if name == "authorization":
            scheme, _, token = value.partition(" ")
            return token.strip() if scheme.lower() == "bearer" else ""
    return ""


def _text(status: int, message: str) -> Reply:
    return Reply(status, (("content-type", "text/plain; charset=utf-8"),), message.encode())


def serve_visibility(
    settings: PlacementSettings,
    http: JsonRequester,
    snapshot: Callable[[], ClusterSnapshot],
    tls: ServingTls | None,
) -> BackgroundServer | None:
    """Serve the endpoint on ``--visibility-port`` with the webhooks' certificate; ``None`` when off.

    Raises:
        OSError: the port is taken.
    """
    if not settings.visibility_port:
        return None
    if tls is None:
        log.warning("visibility endpoint off: it serves the webhooks' certificate, and this replica has none")
        return None
    visibility = Visibility(
        http,
        snapshot,
        clock=time.time,  # wall clock: gang waits meet creationTimestamps
        limit=QuestionLimit(QUESTIONS_PER_MINUTE, QUESTION_BURST, clock=time.monotonic),
    )
    server = serve_in_thread(
        visibility.answer,
        host=settings.webhook_bind_address,
        port=settings.visibility_port,
        limits=LIMITS,
        threads=THREADS,
        context=front_context(tls),
        name="visibility",
    )
    log.info(
        "visibility endpoint serving https://%s:%d/why",
        settings.webhook_bind_address,
        server.server_address[1],
    )
    return server
