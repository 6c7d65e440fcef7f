"""Composition root of the placement manager: ``python -m placement [--kubeconfig PATH] ...``.

Builds the real objects (API client, cache of nodes, all pods and PodGroups, PodGroup writer, event
recorder, metrics, the pin and gate webhooks with their certificates and checks) and runs the reconcile
loop until SIGTERM or SIGINT: gangs, queues, elastic MPIJobs. With leader election (the default) it acts
only while it holds its Lease; a standby keeps its caches warm and its webhooks answering (they keep
nothing: any replica may answer). ``/readyz`` on the metrics port fails while the API server cannot call
the gate webhook, or shortly after a pod was created around it (``placement.health``).
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import sys
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence

from prometheus_client import CollectorRegistry

from kubeio.cluster_cache import ClusterCache
from kubeio.collector import Collector
from kubeio.config import configure_logging
from kubeio.events import EventRecorder
from kubeio.gate_patches import GateWriter
from kubeio.http import KubeHttp, load_api_client
from kubeio.lease import LeaseClient
from kubeio.mpijobs import MpiJobWriter
from kubeio.node_pods import PodAnnotator
from kubeio.nominations import NominationWriter
from kubeio.pins import PinWriter
from kubeio.plan_seal import PlanKeyError, read_key
from kubeio.podgroups import PodGroupWriter
from kubeio.queue_objects import QueueWriter
from placement.assembly import RoundPorts, assemble, observe
from placement.bypass_pass import BypassPass
from placement.election import Leadership
from placement.health import Reasons, serve_health
from placement.placement_metrics import PlacementMetrics
from placement.placement_settings import PlacementSettings
from placement.refusal_pass import RefusalPass
from placement.release_loop import run_release_loop
from placement.release_pass import ReleasePass, ReleaseReport
from placement.round import Round
from placement.uninstall import remove_admission_gates, remove_pin_taints
from placement.views import SharedView
from placement.visibility import serve_visibility
from placement.webhook import Door
from placement.webhook_runtime import start_webhooks
from scheduling.admission.release import KeptRule
from scheduling.model import Pod

log = logging.getLogger("placement")

IDLE_RULES = ("in_flight", *(rule.value for rule in KeptRule))
"""Every label of ``phalanx_admission_idle_gpus``, set each pass (0 when the rule keeps nothing idle)."""


def run(settings: PlacementSettings, stop: threading.Event) -> int:
    """Reconcile every ``interval_seconds`` while leading, until ``stop``; a failed pass is logged, not fatal.

    Returns the exit code: 1 when the Lease was lost (the replica restarts as a candidate), else 0.

    Raises:
        PlanKeyError: plans are carried on pods and the plan key cannot be read; nothing started.
    """
    seal = read_key(settings.plan_key_file) if settings.gates.plan_on_pod else None
    http = KubeHttp(load_api_client(settings.kubeconfig), user_agent="phalanx-placement")
    registry = CollectorRegistry()
    metrics = PlacementMetrics.create(registry)
    cache = ClusterCache(plan_check=None if seal is None else seal.sealed_at)
    metrics.cluster.show(cache.snapshot, time.time)  # wall clock: gang waits start at creationTimestamp
    cache.start(http, stop)
    events = EventRecorder(http, component="phalanx-placement", clock=time.time)
    events.start(stop)
    views = SharedView()  # one queue view per cluster version for the round and the release pass
    collector = Collector(time.monotonic)  # the cyclic collector's full walks kept out of the passes
    leadership = _leadership(settings, http, metrics)
    releaser = None
    nominate = settings.nominate_released and not settings.gates.plan_on_pod  # a plan says more
    if settings.admission_gates:
        releaser = ReleasePass(
            cache,
            GateWriter(http),
            events,
            clock=time.time,  # wall clock: release times meet creationTimestamps
            topologies=cache.topologies,
            settings=settings.gates,
            views=views,
            nominator=NominationWriter(http) if nominate else None,
            annotator=PodAnnotator(http) if settings.gates.plan_on_pod else None,
            seal=seal,
        )
    door = None
    if releaser is not None and settings.admit_at_creation:
        door = _door(releaser, leadership, metrics)
    webhooks = start_webhooks(settings, http, events, metrics, stop, door=door)
    visibility = serve_visibility(settings, http, cache.snapshot, None if webhooks is None else webhooks.tls)
    bypass = None
    if webhooks is not None and settings.admission_gates:
        bypass = BypassPass(
            cache,
            events,
            gate=webhooks.watch.gate,
            clock=time.time,  # wall clock: compared with creationTimestamps
            window=settings.gate_bypass_unready_seconds,
            on_bypass=metrics.gate_bypassed.inc,
        )
    if settings.metrics_port:
        reasons: list[Reasons] = [] if webhooks is None else [webhooks.watch.not_ready]
        reasons += [] if bypass is None else [bypass.recent]
        serve_health(settings.metrics_port, registry, reasons)
    refusals = RefusalPass(cache.refusals.all, events)
    after: list[tuple[str, Callable[[Round], object]]] = [("refusal", lambda _facts: refusals.run())]
    if bypass is not None:
        after.append(("gate bypass", lambda _facts: bypass.run()))  # pods created around the gate webhook
    ports = RoundPorts(
        cache=cache,
        groups=PodGroupWriter(http, native=cache.is_native_group),
        queues=QueueWriter(http),
        mpijobs=MpiJobWriter(http),
        pins=PinWriter(http, effect=settings.pin_taint_effect),
        events=events,
        topologies=cache.topologies,
    )
    reader, passes = assemble(ports, settings, metrics, views, after=after)
    if not cache.wait_synced(120):
        log.warning("caches not synced after 120s; reconciling with what is there")
    elector = leadership.start(stop) if leadership is not None else None
    if releaser is not None:
        _start_release_loop(releaser, cache, metrics, leadership, stop, collector)
    while not stop.is_set():
        if leadership is not None and not leadership.leading.is_set():  # a warm standby: caches only
            if leadership.lost.is_set():
                break
            stop.wait(0.1)
            continue
        started = time.monotonic()
        try:
            facts = reader.read()
        except Exception:  # a bug reading the facts: logged, and the next round reads again
            log.exception("placement round not read; the next one tries again")
        else:
            observe(facts, passes.run(facts), metrics)
        metrics.round_seconds.observe(time.monotonic() - started)
        collector.settle()
        stop.wait(settings.interval_seconds)
    if webhooks is not None:
        webhooks.server.shutdown()
    if visibility is not None:
        visibility.shutdown()
    if elector is not None:
        elector.join(10)  # gives the Lease up at a clean stop
    return 1 if leadership is not None and leadership.lost.is_set() else 0


def _door(releaser: ReleasePass, leadership: Leadership | None, metrics: PlacementMetrics) -> Door:
    """The gate webhook's door: only the leader lets pods in (its book counts them); a standby gates."""

    def door(pod: Pod) -> Mapping[str, str] | None:
        if leadership is not None and not leadership.leading.is_set():
            return None
        given = releaser.let_in(pod)
        if given is not None:
            metrics.admission_groups.labels("released_at_creation").inc()
        return given

    return door


def _start_release_loop(
    releaser: ReleasePass,
    cache: ClusterCache,
    metrics: PlacementMetrics,
    leadership: Leadership | None,
    stop: threading.Event,
    collector: Collector,
) -> None:
    """Release gated groups on their own thread, woken by every pod change (``placement.release_loop``)."""
    wake = threading.Event()
    cache.add_listener(lambda _old, _new: wake.set())

    def on_pass(outcome: ReleaseReport, seconds: float) -> None:
        metrics.admission_pass_seconds.observe(seconds)
        metrics.admission_decide_seconds.observe(outcome.decide_seconds)
        for rule in IDLE_RULES:
            metrics.admission_idle_gpus.labels(rule).set(outcome.idle.get(rule, 0))
        metrics.admission_groups.labels("released").inc(len(outcome.released))
        metrics.admission_groups.labels("refused").inc(len(outcome.refused))
        metrics.admission_kept.set(outcome.kept)
        metrics.admission_in_flight_gpus.set(outcome.in_flight_gpus)
        if outcome.released:
            log.debug("admission: released %s", ", ".join(outcome.released))

    leading = (lambda: True) if leadership is None else leadership.leading.is_set
    threading.Thread(
        target=run_release_loop,
        args=(releaser, wake, stop),
        kwargs={"leading": leading, "clock": time.monotonic, "on_pass": on_pass, "settle": collector.settle},
        name="release-pass",
        daemon=True,
    ).start()


def _leadership(settings: PlacementSettings, http: KubeHttp, metrics: PlacementMetrics) -> Leadership | None:
    """The Lease this replica must hold to act, or ``None`` when leader election is off."""
    if not settings.leader_elect:
        log.info("leader election off: this replica acts alone")
        return None
    identity = f"{socket.gethostname()}_{uuid.uuid4().hex[:8]}"
    lease = LeaseClient(http, settings.lease_namespace, settings.lease_name, wall_clock=time.time)
    log.info("candidate %s for Lease %s/%s", identity, settings.lease_namespace, settings.lease_name)
    return Leadership(
        lease,
        identity,
        duration_seconds=settings.lease_duration_seconds,
        renew_deadline_seconds=settings.renew_deadline_seconds,
        retry_seconds=settings.lease_retry_seconds,
        clock=time.monotonic,
        on_change=lambda leading: metrics.leader.set(1 if leading else 0),
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Parse settings, install signal handlers, run (or only remove the pin taints)."""
    settings = PlacementSettings.parse(argv, os.environ)
    configure_logging(settings.log_level)
    if settings.remove_pin_taints or settings.remove_admission_gates:
        http = KubeHttp(load_api_client(settings.kubeconfig), user_agent="phalanx-placement")
        failed = 0
        if settings.remove_admission_gates:
            failed |= remove_admission_gates(http)
        if settings.remove_pin_taints:
            failed |= remove_pin_taints(http, settings.pin_taint_effect)
        return failed
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    try:
        return run(settings, stop)
    except PlanKeyError as exc:
        print(f"python -m placement: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
