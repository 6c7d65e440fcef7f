"""MultiKueue as phalanx's dispatcher reads and writes it: Workloads to place, worker clusters, nominations.

Kueue's MultiKueue (on the manager cluster) sends a job to worker clusters. Which workers get a copy is
its dispatcher's choice: with ``multiKueue.dispatcherName`` set to a name of neither built-in
(``AllAtOnce``, ``Incremental``), Kueue leaves it to an external controller, which writes
``status.nominatedClusterNames`` on the Workload; MultiKueue then creates the remote copy only on the
workers named there, and the first that admits it runs it. This is the hook phalanx uses
(``placement.dispatcher``): it nominates the worker whose phalanx can place the gang whole now
(``scheduling.dispatch``).

A Workload waits for a nomination while its quota is reserved on the manager, a MultiKueue admission
check of its ClusterQueue is still ``Pending``, and it has no cluster and no nominee the manager reaches
(after a worker is lost, Kueue requeues its Workloads but keeps their nominees). The workers are
the ``MultiKueueCluster`` objects that are ``Active``, each reached through its kubeconfig Secret in
Kueue's namespace (key ``kubeconfig``), exactly as MultiKueue reaches them.
"""

from __future__ import annotations

import base64
import logging
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import quote

import yaml
from kubernetes import client as k8s_client
from kubernetes import config as k8s_config

from kubeio.api_fields import ConvertError
from kubeio.convert import pod_from_api
from kubeio.errors import KubeconfigError
from kubeio.events import ObjectRef
from kubeio.http import JsonRequester, KubeHttp
from scheduling.model import Pod

log = logging.getLogger(__name__)

KUEUE_API = "/apis/kueue.x-k8s.io/v1beta2"
WORKLOADS_PATH = f"{KUEUE_API}/workloads"
MULTIKUEUE_CONTROLLER = "kueue.x-k8s.io/multikueue"
"""The ``controllerName`` of MultiKueue's AdmissionChecks."""

DISPATCHER_NAME = "phalanx.io/multikueue-dispatcher"
"""The ``multiKueue.dispatcherName`` that hands the choice of workers to phalanx."""


@dataclass(frozen=True, slots=True)
class WaitingWorkload:
    """A Workload on the manager that waits for phalanx to name its worker.

    Attributes:
        namespace: its namespace.
        name: its name (the group key of its gang: ``namespace/name``).
        uid: its UID, for events.
        pods: one pod per member of every pod set (``count`` of each), as the job will create them.
    """

    namespace: str
    name: str
    uid: str
    pods: tuple[Pod, ...]

    @property
    def key(self) -> str:
        """``namespace/name``."""
        return f"{self.namespace}/{self.name}"

    @property
    def ref(self) -> ObjectRef:
        """The Workload as the object of an event."""
        return ObjectRef("Workload", "kueue.x-k8s.io/v1beta2", self.namespace, self.name, self.uid)


def multikueue_checks(http: JsonRequester) -> frozenset[str]:
    """The names of the AdmissionChecks MultiKueue controls."""
    items = http.request("GET", f"{KUEUE_API}/admissionchecks").get("items") or []
    return frozenset(
        str(c["metadata"]["name"])
        for c in items
        if isinstance(c, dict) and (c.get("spec") or {}).get("controllerName") == MULTIKUEUE_CONTROLLER
    )


def active_workers(http: JsonRequester) -> frozenset[str]:
    """The MultiKueueClusters the manager reaches now (condition ``Active``)."""
    items = http.request("GET", f"{KUEUE_API}/multikueueclusters").get("items") or []
    return frozenset(str(c["metadata"]["name"]) for c in items if isinstance(c, dict) and _active(c))


def _active(cluster: Mapping[str, Any]) -> bool:
    conditions = (cluster.get("status") or {}).get("conditions") or []
    return any(
        isinstance(c, dict) and c.get("type") == "Active" and c.get("status") == "True" for c in conditions
    )


def waiting_workloads(
    http: JsonRequester, checks: frozenset[str], active: frozenset[str]
) -> tuple[list[WaitingWorkload], list[str]]:
    """Every Workload that waits for a nomination, and a sentence for each one that cannot be read.

    It waits when it has none, and also when none of its nominees is ``active``: Kueue keeps the
    nominees of a Workload it evicted from a lost worker and requeued, and would wait for that worker for
    ever. A Workload phalanx cannot turn into pods (a pod set of the wrong shape) is left out, said in the
    second list, so that the dispatcher logs it and the others are dispatched.
    """
    waiting, problems = [], []
    for raw in http.request("GET", WORKLOADS_PATH).get("items") or []:
        if not isinstance(raw, dict) or not _waits(raw, checks, active):
            continue
        try:
            waiting.append(_waiting(raw))
        except (ConvertError, KeyError, TypeError, ValueError) as exc:
            meta = raw.get("metadata") or {}
            problems.append(f"Workload {meta.get('namespace')}/{meta.get('name')}: {exc}")
    return sorted(waiting, key=lambda w: w.key), problems


def _waits(raw: Mapping[str, Any], checks: frozenset[str], active: frozenset[str]) -> bool:
    status = raw.get("status") or {}
    nominees = status.get("nominatedClusterNames") or []
    if status.get("clusterName") or any(n in active for n in nominees):
        return False
    conditions = {
        c.get("type"): c.get("status") for c in status.get("conditions") or [] if isinstance(c, dict)
    }
    if conditions.get("QuotaReserved") != "True" or conditions.get("Finished") == "True":
        return False
    states = status.get("admissionChecks") or []
    return any(
        isinstance(s, dict) and s.get("name") in checks and s.get("state") == "Pending" for s in states
    )


def _waiting(raw: Mapping[str, Any]) -> WaitingWorkload:
    meta = raw["metadata"]
    namespace, name = str(meta["namespace"]), str(meta["name"])
    pods: list[Pod] = []
    for podset in raw["spec"]["podSets"]:
        template = podset.get("template") or {}
        for i in range(int(podset.get("count", 1))):
            member = {
                "metadata": {
                    "namespace": namespace,
                    "name": f"{name}-{podset['name']}-{i}",
                    "uid": f"{name}/{podset['name']}/{i}",
                },
                "spec": {**(template.get("spec") or {}), "schedulerName": "phalanx"},
            }
            pods.append(pod_from_api(member))
    grouped = tuple(replace(p, group=name) for p in pods)
    return WaitingWorkload(namespace, name, str(meta.get("uid") or ""), grouped)


def worker_clients(http: JsonRequester, namespace: str) -> tuple[dict[str, KubeHttp], list[str]]:
    """A client for every ``Active`` MultiKueueCluster, from its kubeconfig Secret; and the skipped ones."""
    clients: dict[str, KubeHttp] = {}
    skipped: list[str] = []
    for cluster in http.request("GET", f"{KUEUE_API}/multikueueclusters").get("items") or []:
        name = str(cluster["metadata"]["name"])
        if not _active(cluster):
            skipped.append(f"{name}: not Active")
            continue
        source = ((cluster.get("spec") or {}).get("clusterSource") or {}).get("kubeConfig") or {}
        if source.get("locationType", "Secret") != "Secret":
            skipped.append(
                f"{name}: kubeconfig from {source.get('locationType')}, phalanx reads Secrets only"
            )
            continue
        try:
            secret = http.request(
                "GET", f"/api/v1/namespaces/{quote(namespace)}/secrets/{quote(source['location'])}"
            )
            text = base64.b64decode(secret["data"]["kubeconfig"]).decode()
            clients[name] = KubeHttp(api_client_of(text), user_agent="phalanx-dispatcher")
        except (KeyError, ValueError, KubeconfigError) as exc:
            skipped.append(f"{name}: its kubeconfig cannot be used: {exc}")
    return clients, skipped


def api_client_of(kubeconfig: str) -> Any:
    """An ApiClient from a kubeconfig's text (MultiKueue keeps them in Secrets, not files).

    Raises:
        KubeconfigError: the text is no usable kubeconfig.
    """
    configuration = k8s_client.Configuration()
    try:
        document = yaml.safe_load(kubeconfig)
        k8s_config.load_kube_config_from_dict(document, client_configuration=configuration)  # type: ignore[no-untyped-call]
    except (k8s_config.ConfigException, yaml.YAMLError, TypeError, ValueError, OSError) as exc:
        msg = f"not a usable kubeconfig: {exc}"
        raise KubeconfigError(msg) from exc
    return k8s_client.ApiClient(configuration)


def nominate(http: JsonRequester, workload: WaitingWorkload, worker: str) -> None:
    """Name ``worker`` in the Workload's ``status.nominatedClusterNames``: MultiKueue dispatches there."""
    path = f"{KUEUE_API}/namespaces/{quote(workload.namespace)}/workloads/{quote(workload.name)}/status"
    http.request(
        "PATCH",
        path,
        body={"status": {"nominatedClusterNames": [worker]}},
        content_type="application/merge-patch+json",
    )
