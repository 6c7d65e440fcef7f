"""HTTP routes: parse the wire JSON, call the service, render. No decisions here.

Every verb answers 200 with the protocol's reply, or 400 with ``{"Error": reason}`` for a request it
cannot read (kube-scheduler then fails the attempt and retries with backoff). Nothing is reserved or
written for a request that failed to parse: parsing completes before the service is called.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import orjson
from flask import Blueprint, Flask, Response, current_app, request
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from extender import wire
from extender.extender_metrics import ExtenderMetrics
from extender.service import Extender, UnknownNodeError
from scheduling.offline.replay import save_filter

log = logging.getLogger(__name__)

bp = Blueprint("extender", __name__)


def _json(body: Any, status: int = 200) -> Response:
    return Response(orjson.dumps(body), status=status, mimetype="application/json")


def _parts() -> tuple[Extender, ExtenderMetrics]:
    ext = current_app.extensions["phalanx"]
    return ext["service"], ext["metrics"]


def _body() -> dict[str, Any]:
    limit = current_app.config["PHALANX_MAX_BODY_BYTES"]
    length = request.content_length
    if length is not None and length > limit:
        msg = f"request body of {length} bytes is larger than the limit of {limit} bytes"
        raise wire.WireError(msg)
    data = request.stream.read(limit + 1)
    if len(data) > limit:
        msg = f"request body is larger than the limit of {limit} bytes"
        raise wire.WireError(msg)
    return wire.decode(data)


REASON_LIMIT = 1000
"""Characters of a refusal's reason sent and logged: what a request holds is never echoed in full."""


def _bounded(reason: str) -> str:
    if len(reason) <= REASON_LIMIT:
        return reason
    return f"{reason[:REASON_LIMIT]}... ({len(reason)} characters)"


def answer(verb: str, metrics: ExtenderMetrics, run: Callable[[], Any]) -> tuple[int, Any]:
    """Run one verb's ``run`` and turn its result or failure into (status, reply body), counted and timed.

    The one place a verb's outcome is decided, for the Flask routes and the hot path alike
    (``extender.hot``): bad input is a 400 with its bounded reason, anything else unexpected a 500 that
    points at the log.
    """
    start = time.perf_counter()
    outcome = "ok"
    try:
        return 200, run()
    except (wire.WireError, UnknownNodeError) as exc:
        outcome = "bad_request"
        reason = _bounded(str(exc))
        log.info("%s: bad request: %s", verb, reason)
        return 400, {"Error": reason}
    except Exception:
        outcome = "error"
        log.exception("%s failed", verb)
        return 500, {"Error": f"internal error in phalanx {verb}; see the extender log"}
    finally:
        metrics.requests.labels(verb, outcome).inc()
        metrics.request_seconds.labels(verb).observe(time.perf_counter() - start)


def _serve(verb: str, handle: Callable[[dict[str, Any]], Any]) -> Response:
    _, metrics = _parts()
    status, body = answer(verb, metrics, lambda: handle(_body()))
    return _json(body, status)


def decide_filter(service: Extender, metrics: ExtenderMetrics, args: wire.ExtenderArgs) -> dict[str, Any]:
    """The filter verb once its request is parsed: ask the service, count the verdicts, render."""
    decision = service.filter(args.pod, args.node_names, ranked=args.ranked)
    metrics.filter_paths.labels(_path(decision.feasible, args.node_names)).inc()
    metrics.node_verdicts.labels("feasible").inc(len(decision.feasible))
    for reason, count in Counter(r.reason.value for r in decision.rejected.values()).items():
        metrics.node_verdicts.labels(reason).inc(count)
    return wire.filter_result(args, decision.feasible, decision.rejected)


def _path(feasible: tuple[str, ...], asked: tuple[str, ...]) -> str:
    """What kube-scheduler does after this reply: score several nodes, take one, or find none."""
    if not feasible:
        return "none"
    if len(feasible) > 1:
        return "ranked"
    return "single" if len(asked) == 1 else "decisive"


@bp.post("/filter")
def filter_() -> Response:
    """``ExtenderArgs`` -> ``ExtenderFilterResult``."""

    def handle(body: dict[str, Any]) -> Any:
        service, metrics = _parts()
        return decide_filter(
            service, metrics, wire.parse_extender_args(body, current_app.extensions["phalanx"]["pods"])
        )

    return _serve("filter", handle)


@bp.post("/prioritize")
def prioritize() -> Response:
    """``ExtenderArgs`` -> ``HostPriorityList``."""

    def handle(body: dict[str, Any]) -> Any:
        service, _ = _parts()
        args = wire.parse_extender_args(body, current_app.extensions["phalanx"]["pods"])
        return wire.host_priority_list(service.prioritize(args.pod, args.node_names))

    return _serve("prioritize", handle)


@bp.post("/bind")
def bind() -> Response:
    """``ExtenderBindingArgs`` -> ``ExtenderBindingResult``."""

    def handle(body: dict[str, Any]) -> Any:
        service, metrics = _parts()
        args = wire.parse_binding_args(body)
        outcome = service.bind(args.pod_namespace, args.pod_name, args.pod_uid, args.node)
        metrics.binds.labels(outcome.outcome).inc()
        return wire.binding_result(outcome.error)

    return _serve("bind", handle)


@bp.post("/preempt")
def preempt() -> Response:
    """``ExtenderPreemptionArgs`` -> ``ExtenderPreemptionResult``."""

    def handle(body: dict[str, Any]) -> Any:
        service, _ = _parts()
        args = wire.parse_preemption_args(body)
        return wire.preemption_result(service.preempt(args.pod, args.victims))

    return _serve("preempt", handle)


@bp.get("/debug/decision")
def debug_decision() -> Response:
    """The newest decision that turned ``?pod=namespace/name`` down, with everything it read, to replay.

    ``phalanx replay FILE`` (``scheduling.offline.replay.replay_filter``) re-runs it offline, with no cluster.
    The extender is reachable only by its kube-scheduler (it listens on loopback in the shipped manifests),
    and the file holds what that scheduler may read anyway: nodes, pods, PodGroups and Queues.
    """
    service, _ = _parts()
    key = request.args.get("pod", "")
    found = service.decisions.last(key)
    if found is None:
        why = f"no decision that turned pod {key!r} down is kept (give ?pod=namespace/name of a pending pod)"
        return _json({"Error": why}, 404)
    asked, outcome = found
    return Response(save_filter(asked, outcome, service.settings), mimetype="application/json")


@bp.get("/healthz")
def healthz() -> Response:
    """Liveness: the process answers."""
    return _json({"status": "ok"})


@bp.get("/readyz")
def readyz() -> Response:
    """Readiness: the node and pod caches have been listed, so decisions see the whole cluster."""
    ready: Callable[[], bool] = current_app.extensions["phalanx"]["ready"]
    if ready():
        return _json({"status": "ready"})
    return _json({"status": "waiting for the first list of nodes and pods"}, 503)


@bp.get("/metrics")
def metrics_() -> Response:
    """Prometheus text exposition of the injected registry."""
    registry: CollectorRegistry = current_app.extensions["phalanx"]["registry"]
    return Response(generate_latest(registry), mimetype=CONTENT_TYPE_LATEST)


def register(app: Flask) -> None:
    """Attach the routes to ``app``."""
    app.register_blueprint(bp)
