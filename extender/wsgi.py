"""Composition root: the one place that builds real clients, caches and registries.

gunicorn calls ``create()`` once in its single worker (``gunicorn 'extender.wsgi:create()'``), so the
cache threads live in the process that serves the requests. gunicorn's master already listens, so
kube-scheduler's calls queue until ``create()`` returns. Gangs left half-bound by a previous process are
completed or rolled back when kube-scheduler first calls (``extender.duty``), before that call is
answered, so no filter plans around a stale half-bound gang; beside a standby kube-scheduler, which never
calls, nothing is recovered, so the leader's gangs are left to the leader's extender.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from functools import partial

from flask import Flask
from prometheus_client import CollectorRegistry, start_http_server

from extender.app import create_app
from extender.duty import Duty
from extender.extender_metrics import GangMetrics
from extender.extender_settings import ExtenderSettings
from extender.gang_bind import GangBinder, GangSettings, GangTeller
from extender.ledger import PromiseLedger
from extender.nominator import Nominator
from extender.nudger import Nudger
from extender.recovery import GangRecovery
from extender.service import Extender
from extender.view_keeper import ViewKeeper
from kubeio.binding import PodBinder
from kubeio.cluster_cache import LIVE_PODS, ClusterCache
from kubeio.collector import Collector
from kubeio.config import configure_logging
from kubeio.events import EventRecorder
from kubeio.http import KubeHttp, load_api_client
from kubeio.nominations import NominationWriter
from kubeio.podgroups import PodGroupWriter
from scheduling.admission.queue_hold import no_longer_ahead

log = logging.getLogger(__name__)


def create() -> Flask:
    """Build the extender from the environment, start its caches and loops, recover gangs."""
    settings = ExtenderSettings.from_env(os.environ)
    configure_logging(settings.log_level)
    http = KubeHttp(load_api_client(settings.kubeconfig, pool_size=max(16, settings.threads)))
    registry = CollectorRegistry()
    stop = threading.Event()
    collector = Collector(time.monotonic)  # what a watch event copied is frozen before a decision walks it
    cache = ClusterCache(pods_selector=LIVE_PODS, settle=collector.settle)
    binder = PodBinder(http, timeout=settings.api_timeout_seconds)
    events = EventRecorder(http, clock=time.time)
    ledger = PromiseLedger()
    nudger = Nudger(binder, clock=time.monotonic)
    views = ViewKeeper(
        cache.snapshot,
        lambda: ledger.book,
        on_release=nudger.queues_changed,
        on_rebuild=lambda view: nudger.view_rebuilt(partial(no_longer_ahead, view)),
    )
    gang_metrics = GangMetrics.create(registry)
    gang_metrics.reservations.set_function(lambda: len(ledger.book.by_group))  # the truth at each scrape
    teller = GangTeller(events, gang_metrics, time.monotonic)
    writer = PodGroupWriter(http, timeout=settings.api_timeout_seconds, native=cache.is_native_group)
    gangs = GangBinder(
        cache.snapshot,
        ledger,
        writer,
        binder.bind,
        clock=time.monotonic,
        teller=teller,
        node_gone=binder.node_gone,
        settings=GangSettings(
            bind_wait=settings.bind_wait_seconds, bind_delay=settings.gang_bind_delay_seconds
        ),
    )
    recovery = GangRecovery(
        cache.snapshot,
        ledger,
        writer,
        binder.bind,
        board=gangs.board,
        teller=teller,
        node_gone=binder.node_gone,
        clock=time.monotonic,
        hold_seconds=settings.promise_ttl_seconds,
    )
    nominations = NominationWriter(http, timeout=settings.api_timeout_seconds)
    nominator = Nominator(nominations, lambda: ledger.book, cache.snapshot) if settings.nominate else None
    service = Extender(
        cache,
        binder,
        clock=time.monotonic,
        promise_ttl=settings.promise_ttl_seconds,
        topologies=cache.topologies,
        ledger=ledger,
        gangs=gangs,
        teller=teller,
        views=views,
        nudger=nudger,
        nominator=nominator,
        reservation_ttl=settings.reservation_ttl_seconds,
        locality_keys=settings.locality_keys,
        decisive=settings.decisive,
    )
    cache.add_listener(service.pod_changed)
    cache.add_node_listener(service.node_changed)
    cache.add_listener(nudger.pod_changed)
    cache.add_listener(views.pod_changed)
    cache.add_queue_listener(nudger.queues_changed)
    cache.start(http, stop)
    events.start(stop)
    duty = Duty(clock=time.monotonic, window=settings.duty_window_seconds, on_duty=lambda: _recover(recovery))
    if cache.wait_synced(settings.ready_timeout_seconds):
        views.refresh()
    else:
        log.warning(
            "caches not synced after %ss; serving, /readyz says not ready", settings.ready_timeout_seconds
        )
    threading.Thread(target=views.run, args=(stop, 1.0), name="queues", daemon=True).start()
    threading.Thread(target=nudger.run, args=(stop,), name="nudger", daemon=True).start()
    if nominator is not None:
        threading.Thread(target=nominator.run, args=(stop, 1.0), name="nominator", daemon=True).start()
    threading.Thread(
        target=recovery.run,
        args=(stop, settings.recovery_interval_seconds),
        kwargs={"on_duty": duty.on},
        name="recovery",
        daemon=True,
    ).start()
    app = create_app(settings, service, registry=registry, ready=lambda: cache.synced, duty=duty)
    if settings.metrics_port:  # after create_app, which registers the verb metrics in ``registry``
        start_http_server(settings.metrics_port, registry=registry)
        log.info("metrics also served on port %d, all addresses", settings.metrics_port)
    return app


def _recover(recovery: GangRecovery) -> None:
    recovered = recovery.recover_all()
    if recovered:
        log.info("recovered %d gangs left with a bind plan", recovered)
