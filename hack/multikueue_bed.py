"""Several local control planes as one MultiKueue: a manager and worker clusters, each worker with phalanx.

The manager is a control plane with Kueue v0.17.0 (MultiKueue on, workers chosen by phalanx's
dispatcher, ``python -m placement.dispatcher``) and the MPIJob CRD, and nothing that runs pods: no nodes,
no kube-scheduler, no MPI Operator, as MultiKueue's own guide sets a manager up. Each worker is a whole
test bed (``localbed.Testbed``: phalanx, simulated GPU nodes, the MPI Operator) with Kueue beside it. The
manager reaches each worker as MultiKueue does on real clusters (``docs/kueue.md``): a kubeconfig in a
Secret in ``kueue-system``, a ``MultiKueueCluster`` naming it, one ``MultiKueueConfig`` listing them, an
``AdmissionCheck`` of controller ``kueue.x-k8s.io/multikueue`` on the manager's ClusterQueue. Every
cluster has its own state directory and ports, so they run side by side; each is kept small (the machine
has two cores).
"""

from __future__ import annotations

import base64
import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import IO, Any

import bed_kueue
from localbed import REPO, Testbed
from localcluster import MPI_OPERATOR, LocalCluster, build_module

from kubeio.http import KubeHttp, load_api_client
from kubeio.multikueue import DISPATCHER_NAME, MULTIKUEUE_CONTROLLER
from testbed.nodes import SimNodeSpec

CLUSTER_QUEUE = "gpus"
LOCAL_QUEUE = "team"
CHECK = "multikueue"


def _log(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


class MultiKueueBed:
    """A manager and worker clusters; ``start`` brings all up and connects them, ``stop`` takes all down."""

    __test__ = False

    def __init__(
        self,
        root: Path,
        workers: Mapping[str, Sequence[SimNodeSpec]],
        *,
        log: Callable[[str], None] = _log,
    ) -> None:
        self.root = root
        self.log = log
        self.manager = LocalCluster(root / "manager", run_scheduler=False, log=log)
        self.manager_kueue = bed_kueue.KueueProcess(self.manager, root / "manager", log=log)
        self.node_specs = dict(workers)
        self.workers = {
            name: Testbed(root / name, placement_grace=3.0, mpi_operator=True, log=log) for name in workers
        }
        self._dispatcher: subprocess.Popen[bytes] | None = None
        self._dispatcher_log: IO[bytes] | None = None
        self._http: KubeHttp | None = None

    @property
    def http(self) -> KubeHttp:
        """An admin client of the manager."""
        if self._http is None:
            self._http = KubeHttp(load_api_client(str(self.manager.kubeconfig)), user_agent="phalanx-testbed")
        return self._http

    def start(self) -> None:
        """Start the manager, then each worker, then connect them; return once every worker is Active."""
        self.manager.up()
        crd = build_module(MPI_OPERATOR, log=self.log) / "kubeflow.org_mpijobs.yaml"
        self.manager.kubectl("apply", "--server-side", "-f", str(crd))
        _wait_established(self.http, "mpijobs.kubeflow.org")
        self.manager_kueue.start([bed_kueue.MPIJOB_FRAMEWORK], dispatcher=DISPATCHER_NAME)
        total = 0
        for name, bed in self.workers.items():
            bed.start()
            bed.add_nodes(self.node_specs[name])
            bed.start_kueue()
            gpus = sum(spec.gpus for spec in self.node_specs[name])
            total += gpus
            bed_kueue.apply(bed.http, bed_kueue.resource_flavor())
            bed_kueue.apply(bed.http, bed_kueue.cluster_queue(CLUSTER_QUEUE, gpus=gpus))
        self._connect(total)
        self._start_dispatcher()

    def _connect(self, total_gpus: int) -> None:
        """The manager's MultiKueue objects, as its guide writes them for real clusters."""
        http = self.http
        for name, bed in self.workers.items():
            secret = {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": f"{name}-kubeconfig", "namespace": bed_kueue.NAMESPACE},
                "data": {"kubeconfig": base64.b64encode(bed.kubeconfig.read_bytes()).decode()},
            }
            _apply(http, f"/api/v1/namespaces/{bed_kueue.NAMESPACE}/secrets/{name}-kubeconfig", secret)
            cluster = {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "MultiKueueCluster",
                "metadata": {"name": name},
                "spec": {
                    "clusterSource": {
                        "kubeConfig": {"locationType": "Secret", "location": f"{name}-kubeconfig"}
                    }
                },
            }
            bed_kueue.apply(http, cluster)
        bed_kueue.apply(
            http,
            {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "MultiKueueConfig",
                "metadata": {"name": "workers"},
                "spec": {"clusters": sorted(self.workers)},
            },
        )
        check = {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "AdmissionCheck",
            "metadata": {"name": CHECK},
            "spec": {
                "controllerName": MULTIKUEUE_CONTROLLER,
                "parameters": {"apiGroup": "kueue.x-k8s.io", "kind": "MultiKueueConfig", "name": "workers"},
            },
        }
        bed_kueue.apply(http, check)
        bed_kueue.apply(http, bed_kueue.resource_flavor())
        bed_kueue.apply(
            http, bed_kueue.cluster_queue(CLUSTER_QUEUE, gpus=total_gpus, admission_checks=[CHECK])
        )
        deadline = time.monotonic() + 120
        while not all(self.active(name) for name in self.workers):
            if time.monotonic() > deadline:
                states = {name: self.cluster_conditions(name) for name in self.workers}
                msg = f"the workers are not all Active on the manager after 120s: {states}"
                raise RuntimeError(msg)
            time.sleep(0.5)

    def cluster_conditions(self, name: str) -> list[dict[str, Any]]:
        """The manager's conditions of MultiKueueCluster ``name``."""
        cluster = self.http.request("GET", f"{bed_kueue.KUEUE_API}/multikueueclusters/{name}")
        return list((cluster.get("status") or {}).get("conditions") or [])

    def active(self, name: str) -> bool:
        """Whether the manager reaches worker ``name`` (its MultiKueueCluster is ``Active``)."""
        return any(
            c.get("type") == "Active" and c.get("status") == "True" for c in self.cluster_conditions(name)
        )

    def _start_dispatcher(self) -> None:
        path = self.root / "manager" / "logs" / "dispatcher.log"
        self._dispatcher_log = open(path, "ab")  # noqa: SIM115 - closed in stop()
        argv = [sys.executable, "-m", "placement.dispatcher", "--kubeconfig", str(self.manager.kubeconfig)]
        self.log(f"testbed: starting the dispatcher (log: {path})")
        self._dispatcher = subprocess.Popen(
            [*argv, "--interval-seconds", "1"],
            cwd=REPO,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
            stdout=self._dispatcher_log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def add_team(self, namespace: str) -> None:
        """The namespace and its LocalQueue ``team`` on the manager and on every worker still running."""
        for http in [
            self.http,
            *(bed.http for bed in self.workers.values() if bed.cluster.state_dir.exists()),
        ]:
            with contextlib.suppress(Exception):  # a stopped worker: nothing to add there
                _apply(
                    http,
                    f"/api/v1/namespaces/{namespace}",
                    {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
                )
                bed_kueue.apply(http, bed_kueue.local_queue(namespace, LOCAL_QUEUE, CLUSTER_QUEUE))

    def stop_worker(self, name: str) -> None:
        """Take worker ``name`` down whole (its control plane too), as a cluster lost mid-run."""
        self.workers[name].stop()

    def stop(self) -> None:
        """Stop the dispatcher, every worker and the manager."""
        if self._dispatcher is not None and self._dispatcher.poll() is None:
            os.killpg(self._dispatcher.pid, signal.SIGTERM)
            self._dispatcher.wait(15)
        if self._dispatcher_log is not None:
            self._dispatcher_log.close()
        for bed in self.workers.values():
            with contextlib.suppress(Exception):  # already stopped by a test
                bed.stop()
        self.manager_kueue.kill()
        self.manager.down()


def _wait_established(http: KubeHttp, crd: str, timeout: float = 60.0) -> None:
    """Wait until the CRD ``crd`` is Established (``kubectl wait`` fails on one without status yet)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = http.request("GET", f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{crd}")
        conditions = (got.get("status") or {}).get("conditions") or []
        if any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions):
            return
        time.sleep(0.2)
    msg = f"CRD {crd} not Established after {timeout:.0f}s"
    raise RuntimeError(msg)


def _apply(http: KubeHttp, path: str, body: dict[str, Any]) -> None:
    http.request(
        "PATCH",
        path,
        query={"fieldManager": "phalanx-testbed", "force": "true"},
        body=body,
        content_type="application/apply-patch+yaml",
    )
