"""A simulated kubelet for the local test bed (like KWOK, in Python).

For every simulated node (label ``phalanx.io/simulated=true``) it renews the node's Lease and posts its
``Ready`` condition as a kubelet does (``testbed.heartbeat``), so the real node lifecycle controller
keeps it Ready. For every pod bound to a simulated node whose kubelet runs it reports the pod Running
and Ready, finishes it (Succeeded) after the seconds in the annotation
``phalanx.io/sim-duration-seconds`` if present, and completes graceful deletions, as a kubelet would
after the containers stopped. It only writes pod status, Leases and node status, and deletes; it never
decides placement. A test stops one node's kubelet (``testbed.nodes.set_ready``): then its Lease is no
longer renewed (the node lifecycle controller marks the node unreachable), its pods are neither started
nor finished, and their deletions hang, as on a real node that stopped reporting; a node whose kubelet
reports it not Ready is left alone the same way.

A simulated node that names a kubelet device manager (``testbed.device_manager``) admits GPU pods
through it, as a real kubelet does: the containers get their devices from the registered device plugin,
and a pod the device manager cannot serve is rejected.

MPI Operator jobs train: the launcher pod of an MPIJob annotated ``phalanx.io/sim-work-gpu-seconds``
succeeds once its Running pods' GPUs have done that much work, slower when they span more nodes
(the model is in ``testbed.training``); the progress is logged at every change of speed and every
``REPORT_SECONDS``, and written on the launcher pod (``phalanx.io/throughput``) once a changed speed has held
``REPORT_SETTLE_SECONDS`` (again every ``REPORT_SECONDS``, unchanged), never at each change nor while a
change settles (see ``testbed.training``).

Run: ``python -m testbed.kubelet --kubeconfig PATH``.
"""

from __future__ import annotations

import argparse
import heapq
import logging
import signal
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from urllib.parse import quote

from kubeio.convert import ConvertError, pod_requests
from kubeio.errors import KubeError, NotFoundError
from kubeio.http import JsonObject, KubeHttp, load_api_client
from kubeio.mpijob_pods import JOB_NAME_LABEL, ROLE_LABEL
from kubeio.progress import THROUGHPUT_ANNOTATION
from kubeio.reflector import Collection, Reflector
from scheduling.model import GPU_RESOURCE
from testbed.device_manager import Admission, DeviceNodes, rejected_status, with_devices
from testbed.heartbeat import SIMULATED_LABEL, NodeHeartbeat, kubelet_state, node_is_simulated
from testbed.training import (
    SCALING_ANNOTATION,
    WORK_ANNOTATION,
    JobPod,
    Training,
    TrainingBook,
    parse_scaling,
    parse_work,
)

log = logging.getLogger(__name__)

__all__ = ["SIMULATED_LABEL", "SimKubelet", "run"]

DURATION_ANNOTATION = "phalanx.io/sim-duration-seconds"
REPORT_SECONDS = 10.0
"""How often the progress of every training under way is logged (besides every change of speed)."""


def _now_text(clock: Callable[[], float]) -> str:
    return datetime.fromtimestamp(clock(), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def running_status(pod: JsonObject, now: str) -> JsonObject:
    """The status patch a kubelet sends once every container has started."""
    containers = (pod.get("spec") or {}).get("containers") or []
    return {
        "status": {
            "phase": "Running",
            "startTime": now,
            "podIP": "10.0.0.1",
            "conditions": [
                {"type": t, "status": "True", "lastTransitionTime": now}
                for t in ("PodScheduled", "Initialized", "ContainersReady", "Ready")
            ],
            "containerStatuses": [
                {
                    "name": c.get("name", "main"),
                    "image": c.get("image", ""),
                    "imageID": "",
                    "ready": True,
                    "started": True,
                    "restartCount": 0,
                    "state": {"running": {"startedAt": now}},
                }
                for c in containers
            ],
        }
    }


def succeeded_status(pod: JsonObject, now: str) -> JsonObject:
    """The status patch a kubelet sends once every container exited with code 0."""
    containers = (pod.get("spec") or {}).get("containers") or []
    return {
        "status": {
            "phase": "Succeeded",
            "conditions": [
                {"type": "PodScheduled", "status": "True", "lastTransitionTime": now},
                {"type": "Initialized", "status": "True", "lastTransitionTime": now},
                {
                    "type": "ContainersReady",
                    "status": "False",
                    "reason": "PodCompleted",
                    "lastTransitionTime": now,
                },
                {"type": "Ready", "status": "False", "reason": "PodCompleted", "lastTransitionTime": now},
            ],
            "containerStatuses": [
                {
                    "name": c.get("name", "main"),
                    "image": c.get("image", ""),
                    "imageID": "",
                    "ready": False,
                    "started": False,
                    "restartCount": 0,
                    "state": {"terminated": {"exitCode": 0, "reason": "Completed", "finishedAt": now}},
                }
                for c in containers
            ],
        }
    }


class SimKubelet:
    """Drives pods on simulated nodes through their lifecycle."""

    def __init__(
        self, http: KubeHttp, *, clock: Callable[[], float] = time.time, stop: threading.Event | None = None
    ) -> None:
        self._http = http
        self._clock = clock
        self._lock = threading.Lock()
        self._sim_nodes: set[str] = set()
        self._started: set[str] = set()
        self._timers: list[tuple[float, str, str, str]] = []  # (due, uid, namespace, name)
        self._training = TrainingBook()
        self._wake = threading.Event()
        self._devices = DeviceNodes(
            running=self._admitted,
            rejected=self._rejected,
            node_resources=self._node_resources,
            stop=stop or threading.Event(),
        )

    # node tracking
    def nodes_replaced(self, items: list[JsonObject]) -> None:
        """A full node list: remember which simulated nodes' kubelets run and report Ready."""
        with self._lock:
            self._sim_nodes = {n["metadata"]["name"] for n in items if kubelet_state(n) == "running"}
        for node in items:
            if node_is_simulated(node):
                self._devices.node(node["metadata"]["name"], node["metadata"].get("annotations") or {})

    def node_event(self, kind: str, node: JsonObject) -> None:
        """A node watch event."""
        name = node["metadata"]["name"]
        if kind != "DELETED" and node_is_simulated(node):
            self._devices.node(name, node["metadata"].get("annotations") or {})
        with self._lock:
            if kind != "DELETED" and kubelet_state(node) == "running":
                self._sim_nodes.add(name)
            else:
                self._sim_nodes.discard(name)

    # pod handling
    def pods_replaced(self, items: list[JsonObject]) -> None:
        """A full pod list: act on each pod as if it had just changed."""
        for pod in items:
            self.pod_event("MODIFIED", pod)

    def pod_event(self, kind: str, pod: JsonObject) -> None:
        """A pod watch event: start, finish or remove the pod as a kubelet would."""
        meta = pod.get("metadata") or {}
        spec = pod.get("spec") or {}
        status = pod.get("status") or {}
        uid, node = meta.get("uid", ""), spec.get("nodeName")
        if kind == "DELETED":
            with self._lock:
                self._started.discard(uid)
            self._stop_training(uid)
            self._devices.remove(str(node), pod)
            return
        with self._lock:
            simulated = node in self._sim_nodes
        if not simulated:
            return
        if meta.get("deletionTimestamp"):
            self._stop_training(uid)
            self._delete_now(meta)
            return
        if status.get("phase") in ("Succeeded", "Failed"):
            self._stop_training(uid)
            self._devices.remove(str(node), pod)
            return
        with self._lock:
            if uid in self._started:
                return
            self._started.add(uid)
        if self._devices.manages(node):
            self._devices.admit(str(node), pod)  # _admitted or _rejected follows, in the node's order
            return
        self._patch_status(meta, running_status(pod, _now_text(self._clock)))
        self._run(pod, str(node))

    def _admitted(self, pod: JsonObject, admission: Admission) -> None:
        """The device manager gave every container its devices: the pod runs."""
        patch = with_devices(running_status(pod, _now_text(self._clock)), admission.statuses)
        self._patch_status(pod["metadata"], patch)
        self._run(pod, str((pod.get("spec") or {}).get("nodeName")))

    def _rejected(self, pod: JsonObject, admission: Admission) -> None:
        """The device manager could not serve the pod: the kubelet rejects it (Failed)."""
        self._patch_status(pod["metadata"], rejected_status(admission.reason, admission.message))

    def _node_resources(self, node: str, capacity: dict[str, str], allocatable: dict[str, str]) -> None:
        """Report the device manager's capacity and allocatable on the Node, as the kubelet does."""
        body = {
            "status": {
                "capacity": {GPU_RESOURCE: "0", **capacity},
                "allocatable": {GPU_RESOURCE: "0", **allocatable},
            }
        }
        try:
            self._http.request(
                "PATCH",
                f"/api/v1/nodes/{quote(node)}/status",
                body=body,
                content_type="application/merge-patch+json",
            )
        except KubeError as exc:
            log.warning("node %s: reporting device capacity: %s", node, exc)

    def _run(self, pod: JsonObject, node: str) -> None:
        """A started pod: its training (MPIJobs) and its simulated duration begin."""
        meta = pod["metadata"]
        uid = meta["uid"]
        self._start_training(pod, node)
        duration = (meta.get("annotations") or {}).get(DURATION_ANNOTATION)
        if duration is not None:
            try:
                seconds = float(duration)
            except ValueError:
                log.warning(
                    "pod %s/%s: %s=%r is not a number",
                    meta.get("namespace"),
                    meta.get("name"),
                    DURATION_ANNOTATION,
                    duration,
                )
                return
            with self._lock:
                heapq.heappush(self._timers, (self._clock() + seconds, uid, meta["namespace"], meta["name"]))
            self._wake.set()

    def run_timers(self, stop: threading.Event) -> None:
        """Finish pods whose simulated duration or training has passed, until ``stop`` is set."""
        next_report = self._clock() + REPORT_SECONDS
        while not stop.is_set():
            now = self._clock()
            with self._lock:
                finished = self._training.take_finished(now)
                report = self._training.settled(now)
                progress = self._training.trainings() if now >= next_report else []
                # the settled ones again (their text unchanged, the API server writes nothing)
                report += [t for t in progress if t.changed_at is None and all(t is not r for r in report)]
                eta = self._training.next_finish(now)
                settling = self._training.next_settled()
                due = self._timers[0][0] if self._timers else None
            for uid, training in finished:
                log.info("%s: finished, launcher %s succeeds", training.describe(), training.launcher)
                self._finish(uid, training.namespace, training.launcher)
            if now >= next_report:
                for training in progress:
                    log.info("%s", training.describe())
                next_report = now + REPORT_SECONDS
            self._report(report)
            if due is None or due > now:
                wake = min(t for t in (due, eta, next_report, settling) if t is not None)
                self._wake.wait(min(0.5, max(wake - now, 0.0)))
                self._wake.clear()
                continue
            with self._lock:
                _, uid, namespace, name = heapq.heappop(self._timers)
            self._finish(uid, namespace, name)

    def _start_training(self, pod: JsonObject, node: str) -> None:
        """Count a started pod of an MPIJob; a launcher starts its job's training if it declares work."""
        meta = pod["metadata"]
        labels = meta.get("labels") or {}
        job = labels.get(JOB_NAME_LABEL)
        if not isinstance(job, str) or not job:
            return
        try:
            gpus = pod_requests(pod.get("spec") or {}).gpus
        except ConvertError:
            gpus = 0
        namespace = meta["namespace"]
        training = None
        role = labels.get(ROLE_LABEL)
        if role == "launcher":
            work, scaling = self._declared_work(namespace, job)
            if work is not None:
                training = Training(namespace, job, meta["name"], work, scaling=scaling)
        now = self._clock()
        with self._lock:
            running = JobPod(namespace, job, node, gpus, worker=role == "worker")
            changed = self._training.pod_running(meta["uid"], running, now)
            if training is not None:
                changed.append(self._training.launcher_started(meta["uid"], training, now))
        for each in changed:
            log.info("%s", each.describe())
        self._wake.set()  # the timer loop reports the new speed once it has held

    def _stop_training(self, uid: str) -> None:
        """A pod no longer runs: its job's speed may change, a launcher's training ends."""
        with self._lock:
            changed = self._training.pod_gone(uid, self._clock())
        for each in changed:
            log.info("%s", each.describe())
        self._wake.set()

    def _report(self, trainings: list[Training]) -> None:
        """Write each training's throughput on its launcher pod, as a launcher would (``kubeio.progress``)."""
        for training in trainings:
            text = training.report()
            if text is None:
                continue
            try:
                self._http.request(
                    "PATCH",
                    f"/api/v1/namespaces/{quote(training.namespace)}/pods/{quote(training.launcher)}",
                    body={"metadata": {"annotations": {THROUGHPUT_ANNOTATION: text}}},
                    content_type="application/merge-patch+json",
                )
            except KubeError as exc:
                log.info("mpijob %s/%s: throughput not reported: %s", training.namespace, training.job, exc)

    def _declared_work(self, namespace: str, job: str) -> tuple[float | None, float]:
        """The GPU-seconds the MPIJob ``job`` declares (None: none, or a bad annotation), and its scaling."""
        try:
            mpijob = self._http.request("GET", _mpijob_path(namespace, job))
        except KubeError as exc:
            log.warning("mpijob %s/%s: cannot read its work: %s", namespace, job, exc)
            return None, 1.0
        annotations = (mpijob.get("metadata") or {}).get("annotations") or {}
        text = annotations.get(WORK_ANNOTATION)
        work = parse_work(text)
        if text is not None and work is None:
            log.warning("mpijob %s/%s: %s=%r is not a positive number", namespace, job, WORK_ANNOTATION, text)
        return work, parse_scaling(annotations.get(SCALING_ANNOTATION))

    def _finish(self, uid: str, namespace: str, name: str) -> None:
        path = f"/api/v1/namespaces/{quote(namespace)}/pods/{quote(name)}"
        try:
            pod = self._http.request("GET", path)
        except NotFoundError:
            return
        except KubeError as exc:
            log.warning("finishing %s/%s: %s", namespace, name, exc)
            return
        if (pod.get("metadata") or {}).get("uid") != uid:
            return
        self._patch_status(pod["metadata"], succeeded_status(pod, _now_text(self._clock)))

    def _patch_status(self, meta: JsonObject, patch: JsonObject) -> None:
        path = f"/api/v1/namespaces/{quote(meta['namespace'])}/pods/{quote(meta['name'])}/status"
        patch = {"metadata": {"uid": meta["uid"]}, **patch}
        try:
            self._http.request("PATCH", path, body=patch, content_type="application/merge-patch+json")
        except KubeError as exc:
            log.warning("status of %s/%s: %s", meta["namespace"], meta["name"], exc)

    def _delete_now(self, meta: JsonObject) -> None:
        path = f"/api/v1/namespaces/{quote(meta['namespace'])}/pods/{quote(meta['name'])}"
        body = {
            "kind": "DeleteOptions",
            "apiVersion": "v1",
            "gracePeriodSeconds": 0,
            "preconditions": {"uid": meta["uid"]},
        }
        try:
            self._http.request("DELETE", path, body=body)
        except NotFoundError:
            pass
        except KubeError as exc:
            log.warning("deleting %s/%s: %s", meta["namespace"], meta["name"], exc)


def run(kubeconfig: str | None, stop: threading.Event, *, lease_seconds: int = 40) -> None:
    """Watch nodes and pods, beat for the simulated nodes and drive their pods until ``stop`` is set."""
    http = KubeHttp(load_api_client(kubeconfig), user_agent="phalanx-sim-kubelet")
    kubelet = SimKubelet(http, stop=stop)
    heartbeat = NodeHeartbeat(http, clock=time.time, lease_seconds=lease_seconds)

    def nodes_replaced(items: list[JsonObject]) -> None:
        kubelet.nodes_replaced(items)
        heartbeat.nodes_replaced(items)

    def node_event(kind: str, node: JsonObject) -> None:
        kubelet.node_event(kind, node)
        heartbeat.node_event(kind, node)

    nodes = Reflector(
        http, Collection("/api/v1/nodes"), on_replace=nodes_replaced, on_event=node_event, stop=stop
    )
    pods = Reflector(
        http,
        Collection("/api/v1/pods"),
        on_replace=kubelet.pods_replaced,
        on_event=kubelet.pod_event,
        stop=stop,
    )
    threading.Thread(target=nodes.run, name="watch-nodes", daemon=True).start()
    nodes.synced.wait(60)
    threading.Thread(target=pods.run, name="watch-pods", daemon=True).start()
    threading.Thread(target=kubelet.run_timers, args=(stop,), name="timers", daemon=True).start()
    threading.Thread(target=heartbeat.run, args=(stop,), name="heartbeat", daemon=True).start()
    stop.wait()


def _mpijob_path(namespace: str, job: str) -> str:
    return f"/apis/kubeflow.org/v2beta1/namespaces/{quote(namespace)}/mpijobs/{quote(job)}"


def main() -> None:
    """Command line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kubeconfig", default=None, help="kubeconfig path (default: in-cluster)")
    parser.add_argument(
        "--node-lease-seconds",
        type=int,
        default=40,
        help="each node Lease's duration, renewed every quarter of it (default: the kubelet's 40)",
    )
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s sim-kubelet %(levelname)s %(message)s")
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    run(args.kubeconfig, stop, lease_seconds=args.node_lease_seconds)


if __name__ == "__main__":
    main()
