"""phalanx as MultiKueue's dispatcher, on the manager cluster: ``python -m placement.dispatcher``.

Kueue's MultiKueue lets an external controller choose the worker clusters a job is copied to (its
``multiKueue.dispatcherName`` set to ``phalanx.io/multikueue-dispatcher``; ``kubeio.multikueue``). This
is that controller: every ``--interval-seconds`` it lists the Workloads waiting for a nomination and,
only if there are any, reads each Active worker through the kubeconfig Secret MultiKueue itself uses,
asks the core where each gang fits whole now (``scheduling.dispatch``, phalanx's own gang planner on the
worker's GPUs) and nominates that worker. MultiKueue does the rest as it always does: it creates the job
on that worker, keeps it there while it runs, and on a worker lost (``workerLostTimeout``) evicts the
Workload, which then waits here again and is sent to a worker that can hold it; the job never runs in
two clusters, because MultiKueue only ever creates it where it is nominated and removes it elsewhere.

Each decision is an event on the Workload (``Dispatched`` with every worker's answer, or
``DispatchWaiting`` saying why no worker can hold it now). One replica: a second would only nominate the
same worker (the decision is a pure function of what both read), and MultiKueue ignores a second write
of the same nominee.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from kubeio.cluster_read import read_cluster
from kubeio.config import LOG_LEVEL, LOG_LEVEL_ENV, SECONDS, configure_logging
from kubeio.errors import KubeError
from kubeio.events import EventRecorder
from kubeio.http import KubeHttp, load_api_client
from kubeio.multikueue import active_workers, multikueue_checks, nominate, waiting_workloads, worker_clients
from kubeio.setting import Setting, command, parse
from scheduling.cluster.statement import Statement
from scheduling.dispatch import dispatch
from scheduling.topology import TopologyCache

log = logging.getLogger("placement.dispatcher")


@dataclass(frozen=True, slots=True)
class DispatchReport:
    """What one pass did: the Workloads sent (``namespace/name -> worker``), those left waiting, faults."""

    sent: dict[str, str]
    waiting: tuple[str, ...]
    problems: tuple[str, ...]


class DispatchPass:
    """One pass of the dispatcher: read, ask the core, nominate, tell."""

    def __init__(self, http: KubeHttp, events: EventRecorder, *, kueue_namespace: str) -> None:
        self._http = http
        self._events = events
        self._namespace = kueue_namespace
        self._topologies = TopologyCache()

    def run(self) -> DispatchReport:
        """Nominate a worker for every Workload that waits for one and fits whole somewhere now."""
        checks = multikueue_checks(self._http)
        if not checks:
            return DispatchReport({}, (), ())
        waiting, problems = waiting_workloads(self._http, checks, active_workers(self._http))
        if not waiting:
            return DispatchReport({}, (), tuple(problems))
        clients, skipped = worker_clients(self._http, self._namespace)
        problems += skipped
        works: dict[str, Statement] = {}
        for name, client in sorted(clients.items()):
            try:
                works[name] = Statement(read_cluster(client, topologies=self._topologies).snapshot)
            except KubeError as exc:  # a worker that cannot be read now is not offered this pass
                problems.append(f"{name}: cannot be read: {exc}")
        sent: dict[str, str] = {}
        held: list[str] = []
        for workload in waiting:
            decision = dispatch(workload.key, workload.pods, works, self._topologies)
            if decision.nominated is None:
                self._events.record(workload.ref, "Normal", "DispatchWaiting", decision.message)
                held.append(workload.key)
                continue
            self._events.record_now(workload.ref, "Normal", "Dispatched", decision.message)
            try:
                nominate(self._http, workload, decision.nominated)
            except KubeError as exc:
                problems.append(f"{workload.key}: nomination not written ({exc}); the next pass tries again")
                continue
            sent[workload.key] = decision.nominated
        return DispatchReport(sent, tuple(held), tuple(problems))


@dataclass(frozen=True, slots=True)
class DispatcherSettings:
    """How the dispatcher runs (``python -m placement.dispatcher --help``)."""

    kubeconfig: str | None = None
    """The manager cluster's kubeconfig; unset: in-cluster."""

    interval_seconds: float = 2.0
    """Time between two dispatch passes."""

    kueue_namespace: str = "kueue-system"
    """Where MultiKueue's kubeconfig Secrets are."""

    log_level: str = "INFO"
    """Python logging level."""


SETTINGS = (
    Setting("kubeconfig", "--kubeconfig", help="the manager cluster's kubeconfig; unset: in-cluster"),
    Setting("interval_seconds", "--interval-seconds", type=SECONDS, help="seconds between passes"),
    Setting("kueue_namespace", "--kueue-namespace", help="where MultiKueue's kubeconfig Secrets are"),
    Setting("log_level", "--log-level", (LOG_LEVEL_ENV,), LOG_LEVEL, "Python logging level"),
)
"""Every setting of the dispatcher, once (``kubeio.setting``)."""


def main(argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None) -> int:
    """Run the dispatcher until SIGTERM or SIGINT."""
    cmd = command(SETTINGS, DispatcherSettings(), about=(__doc__ or "").splitlines()[0])
    args: DispatcherSettings = parse(
        cmd, argv, os.environ if environ is None else environ, prog="python -m placement.dispatcher"
    )
    configure_logging(args.log_level)
    http = KubeHttp(load_api_client(args.kubeconfig), user_agent="phalanx-dispatcher")
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    events = EventRecorder(http, component="phalanx-dispatcher", clock=time.time)
    events.start(stop)
    dispatcher = DispatchPass(http, events, kueue_namespace=args.kueue_namespace)
    log.info("dispatching MultiKueue workloads every %.1fs", args.interval_seconds)
    while not stop.is_set():
        try:
            report = dispatcher.run()
        except KubeError as exc:
            log.warning("dispatch pass failed (%s); the next pass tries again", exc)
        else:
            for key, worker in sorted(report.sent.items()):
                log.info("%s: sent to worker cluster %s", key, worker)
            for problem in report.problems:
                log.warning("%s", problem)
        stop.wait(args.interval_seconds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
