"""Kueue v0.17.0 on the test bed: its CRDs, its configuration, its webhooks on loopback.

Kueue is built from the module proxy (``hack/kueue``, ``localcluster.KUEUE``) with its CRDs and webhook
manifests copied from the same module into the bin directory, so the objects installed are exactly the
release's. Its own install is a Deployment behind a Service with a certificate Kueue makes itself; here
it is a process on loopback, so the test bed does what that install's pieces do: a serving certificate
signed by the cluster's CA in ``certDir`` (``internalCertManagement`` off), and the release's webhook
configurations renamed ``-testbed`` with a loopback URL and that CA in place of the Service. Only the
webhooks of what the bed uses are registered (Kueue's own objects and MPIJobs; ``batch/job`` too with
``frameworks``): a webhook for a kind whose integration is off is not served, and with
``failurePolicy: Fail`` it would refuse every such object.
"""

from __future__ import annotations

import base64
import contextlib
import copy
import os
import signal
import socket
import subprocess
import time
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any

import yaml
from localcluster import KUEUE, LocalCluster, build_module
from localcluster.pki import ensure_serving_cert

from kubeio.errors import NotFoundError
from kubeio.http import KubeHttp, load_api_client

NAMESPACE = "kueue-system"
"""Kueue's namespace, as its release installs it (MultiKueue's kubeconfig Secrets live here)."""

MPIJOB_FRAMEWORK = "kubeflow.org/mpijob"

_KUEUE_OWN = ("clusterqueue", "cohort", "resourceflavor", "workload")
"""The webhooks of Kueue's own objects (their defaulting and validation), always registered."""

_FRAMEWORK_WEBHOOKS = {MPIJOB_FRAMEWORK: "mpijob", "batch/job": "job"}
"""Integration -> the suffix of its webhooks' names (``m<suffix>.kb.io``, ``v<suffix>.kb.io``)."""

_CONFIGS = {
    "MutatingWebhookConfiguration": "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations",
    "ValidatingWebhookConfiguration": "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations",
}


FEATURE_GATES = "VisibilityOnDemand=false"
"""Kueue's on-demand visibility API server is off: it wants certificates in ``/visibility`` and a port of
its own per process, and nothing on the bed reads it."""


def configuration(
    *,
    webhook_port: int,
    health_port: int,
    cert_dir: Path,
    frameworks: Sequence[str],
    dispatcher: str | None = None,
) -> str:
    """Kueue's ``Configuration`` (``config.kueue.x-k8s.io/v1beta2``) for one process on loopback.

    Leader election off (one replica), webhook certificates from ``cert_dir``, and only the named
    integrations; jobs without ``kueue.x-k8s.io/queue-name`` stay outside Kueue (its default).
    """
    config: dict[str, Any] = {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "namespace": NAMESPACE,
        "health": {"healthProbeBindAddress": f"127.0.0.1:{health_port}"},
        "metrics": {"bindAddress": "0"},  # off: nothing on the bed scrapes it
        "webhook": {"port": webhook_port, "host": "127.0.0.1", "certDir": str(cert_dir)},
        "leaderElection": {"leaderElect": False},
        "internalCertManagement": {"enable": False},
        "manageJobsWithoutQueueName": False,
        "clientConnection": {"qps": 50, "burst": 100},
        "integrations": {"frameworks": list(frameworks)},
    }
    if dispatcher is not None:
        # A MultiKueue manager: workers chosen by ``dispatcher``; a worker unreachable for 30 s (not the
        # default 15 min) is lost and its jobs go elsewhere, so that a test sees a failover in seconds.
        config["multiKueue"] = {"gcInterval": "10s", "workerLostTimeout": "30s", "dispatcherName": dispatcher}
    return yaml.safe_dump(config, sort_keys=False)


def install_crds(kubectl: Any, bins: Path) -> None:
    """Apply Kueue's CRDs (server-side: some are too large for client-side apply) and wait for them."""
    crds = sorted(bins.glob("kueue.x-k8s.io_*.yaml"))
    args: list[str] = []
    for crd in crds:
        args += ["-f", str(crd)]
    kubectl("apply", "--server-side", "--force-conflicts", *args)
    deadline = time.monotonic() + 60
    while kubectl("wait", "--for=condition=Established", "--timeout=60s", *args, check=False).returncode:
        if time.monotonic() > deadline:  # a CRD without status yet fails the wait at once: try again
            kubectl("wait", "--for=condition=Established", "--timeout=5s", *args)
        time.sleep(0.5)
    kubectl(
        "apply",
        "--server-side",
        "-f",
        "-",
        input=f"apiVersion: v1\nkind: Namespace\nmetadata: {{name: {NAMESPACE}}}\n",
    )


def webhook_configurations(
    bins: Path, base_url: str, ca_file: Path, frameworks: Sequence[str]
) -> list[dict[str, Any]]:
    """The release's two webhook configurations, renamed, on loopback, with only the webhooks served."""
    wanted = set(_KUEUE_OWN) | {_FRAMEWORK_WEBHOOKS[f] for f in frameworks if f in _FRAMEWORK_WEBHOOKS}
    bundle = base64.b64encode(ca_file.read_bytes()).decode()
    configs = []
    for document in yaml.safe_load_all((bins / "webhooks.yaml").read_text()):
        if not document or document.get("kind") not in _CONFIGS:
            continue
        config = copy.deepcopy(document)
        config["metadata"] = {"name": f"kueue-{document['metadata']['name']}-testbed"}
        hooks = []
        for webhook in config["webhooks"]:
            if webhook["name"].removesuffix(".kb.io")[1:] not in wanted:
                continue
            path = webhook["clientConfig"]["service"]["path"]
            webhook["clientConfig"] = {"url": f"{base_url}{path}", "caBundle": bundle}
            hooks.append(webhook)
        config["webhooks"] = hooks
        configs.append(config)
    return configs


def register_webhooks(http: KubeHttp, configs: Sequence[dict[str, Any]]) -> None:
    """Server-side apply each configuration."""
    for config in configs:
        path = f"{_CONFIGS[config['kind']]}/{config['metadata']['name']}"
        http.request(
            "PATCH",
            path,
            query={"fieldManager": "phalanx-testbed", "force": "true"},
            body=config,
            content_type="application/apply-patch+yaml",
        )


def unregister_webhooks(http: KubeHttp, configs: Sequence[dict[str, Any]]) -> None:
    """Delete the test bed's Kueue webhook configurations (so that a stopped Kueue refuses nothing)."""
    for config in configs:
        with contextlib.suppress(NotFoundError):
            http.request("DELETE", f"{_CONFIGS[config['kind']]}/{config['metadata']['name']}")


def admits_dry_runs(http: KubeHttp) -> bool:
    """Whether the API server reaches Kueue's webhooks: a ResourceFlavor created as a dry run is accepted."""
    flavor = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ResourceFlavor",
        "metadata": {"name": "phalanx-webhook-probe"},
    }
    try:
        http.request(
            "POST", "/apis/kueue.x-k8s.io/v1beta2/resourceflavors", query={"dryRun": "All"}, body=flavor
        )
    except Exception:  # any refusal means not yet: the caller waits, and says so on its timeout
        return False
    return True


KUEUE_API = "/apis/kueue.x-k8s.io/v1beta2"


def resource_flavor(name: str = "default-flavor") -> dict[str, Any]:
    """A ResourceFlavor with no node labels: every node (Kueue counts quota, phalanx picks nodes)."""
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": name}}


def cluster_queue(
    name: str,
    *,
    gpus: int,
    cpu: str = "64",
    memory: str = "256Gi",
    flavor: str = "default-flavor",
    admission_checks: Sequence[str] = (),
) -> dict[str, Any]:
    """A ClusterQueue of every namespace with a nominal quota of ``gpus`` GPUs (and CPU, memory)."""
    spec: dict[str, Any] = {
        "namespaceSelector": {},
        "resourceGroups": [
            {
                "coveredResources": ["cpu", "memory", "nvidia.com/gpu"],
                "flavors": [
                    {
                        "name": flavor,
                        "resources": [
                            {"name": "cpu", "nominalQuota": cpu},
                            {"name": "memory", "nominalQuota": memory},
                            {"name": "nvidia.com/gpu", "nominalQuota": gpus},
                        ],
                    }
                ],
            }
        ],
    }
    if admission_checks:
        spec["admissionChecksStrategy"] = {"admissionChecks": [{"name": c} for c in admission_checks]}
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": name},
        "spec": spec,
    }


def local_queue(namespace: str, name: str, cluster_queue_name: str) -> dict[str, Any]:
    """A LocalQueue ``name`` in ``namespace`` feeding ``cluster_queue_name``."""
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "LocalQueue",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"clusterQueue": cluster_queue_name},
    }


def apply(http: KubeHttp, obj: dict[str, Any]) -> None:
    """Server-side apply one Kueue object (cluster-scoped or namespaced)."""
    kind = obj["kind"].lower() + ("es" if obj["kind"].endswith("s") else "s")
    namespace = obj["metadata"].get("namespace")
    where = f"/namespaces/{namespace}" if namespace else ""
    http.request(
        "PATCH",
        f"{KUEUE_API}{where}/{kind}/{obj['metadata']['name']}",
        query={"fieldManager": "phalanx-testbed", "force": "true"},
        body=obj,
        content_type="application/apply-patch+yaml",
    )


def workloads(http: KubeHttp, namespace: str) -> list[dict[str, Any]]:
    """Kueue's Workloads in ``namespace``."""
    return list(http.request("GET", f"{KUEUE_API}/namespaces/{namespace}/workloads").get("items") or [])


def has_condition(obj: dict[str, Any], kind: str, status: str = "True") -> bool:
    """Whether ``obj`` has the condition ``kind`` with ``status``."""
    conditions = (obj.get("status") or {}).get("conditions") or []
    return any(c.get("type") == kind and c.get("status") == status for c in conditions)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


METRICS_CERTS = Path("/etc/kueue/metrics/certs")
"""Where Kueue v0.17 reads its metrics certificate when its internal certificates are off: a constant in
its ``cmd/kueue/main.go``, read even with metrics off (it exits without it), as its Deployment mounts it."""


def _metrics_certificate(key: Path, crt: Path) -> None:
    """Put a certificate where Kueue insists on one, once per machine (never served: metrics are off)."""
    if (METRICS_CERTS / "tls.crt").is_file() and (METRICS_CERTS / "tls.key").is_file():
        return
    METRICS_CERTS.mkdir(parents=True, exist_ok=True)
    (METRICS_CERTS / "tls.key").write_bytes(key.read_bytes())
    (METRICS_CERTS / "tls.crt").write_bytes(crt.read_bytes())


class KueueProcess:
    """One Kueue controller manager on a local control plane, as its release installs it there.

    It runs as the cluster's admin (its own install binds a ClusterRole of everything it manages), on
    loopback with a serving certificate of the cluster's CA; ``start`` installs the CRDs and the
    webhooks and returns once the API server reaches them.
    """

    def __init__(self, cluster: LocalCluster, state_dir: Path, *, log: Callable[[str], None]) -> None:
        self.cluster = cluster
        self.state_dir = state_dir
        self.log = log
        self.proc: subprocess.Popen[bytes] | None = None
        self._log_file: IO[bytes] | None = None
        self._webhooks: list[dict[str, Any]] = []
        self._http: KubeHttp | None = None

    @property
    def http(self) -> KubeHttp:
        """An admin client of the cluster Kueue runs on."""
        if self._http is None:
            self._http = KubeHttp(load_api_client(str(self.cluster.kubeconfig)), user_agent="phalanx-testbed")
        return self._http

    @property
    def log_path(self) -> Path:
        """Kueue's log."""
        return self.state_dir / "logs" / "kueue.log"

    def start(
        self, frameworks: Sequence[str], *, dispatcher: str | None = None, timeout: float = 120.0
    ) -> None:
        """Install CRDs and webhooks, start Kueue, wait until its webhooks admit a dry run.

        Raises:
            RuntimeError: Kueue exits, or its webhooks do not admit objects in time.
        """
        if self.proc is not None and self.proc.poll() is None:
            return
        bins = build_module(KUEUE, log=self.log)
        install_crds(self.cluster.kubectl, bins)
        pki = self.cluster.ca_file.parent
        key, crt = ensure_serving_cert(pki, "kueue-webhook", "/CN=kueue-webhook", ("IP:127.0.0.1",))
        certs = self.state_dir / "kueue-certs"
        certs.mkdir(exist_ok=True)
        (certs / "tls.key").write_bytes(key.read_bytes())
        (certs / "tls.crt").write_bytes(crt.read_bytes())
        _metrics_certificate(key, crt)
        port, health = _free_port(), _free_port()
        config = self.state_dir / "kueue-config.yaml"
        config.write_text(
            configuration(
                webhook_port=port,
                health_port=health,
                cert_dir=certs,
                frameworks=frameworks,
                dispatcher=dispatcher,
            )
        )
        self._webhooks = webhook_configurations(
            bins, f"https://127.0.0.1:{port}", self.cluster.ca_file, frameworks
        )
        register_webhooks(self.http, self._webhooks)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log_file = open(self.log_path, "ab")  # noqa: SIM115 - closed in kill()
        argv = [
            str(bins / "kueue"),
            f"--config={config}",
            f"--feature-gates={FEATURE_GATES}",
            "--zap-log-level=3",
        ]
        self.log(f"testbed: starting kueue (log: {self.log_path})")
        self.proc = subprocess.Popen(
            argv,
            env={**os.environ, "KUBECONFIG": str(self.cluster.kubeconfig)},
            stdout=self._log_file,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.cluster.record_process("testbed-kueue", self.proc.pid)
        deadline = time.monotonic() + timeout
        while not (self._ready(health) and admits_dry_runs(self.http)):
            if self.proc.poll() is not None:
                tail = self.log_path.read_text(errors="replace")[-3000:]
                msg = f"kueue exited with {self.proc.returncode}:\n{tail}"
                raise RuntimeError(msg)
            if time.monotonic() > deadline:
                msg = f"Kueue's webhooks do not admit a dry run after {timeout:.0f}s (log: {self.log_path})"
                raise RuntimeError(msg)
            time.sleep(0.2)

    @staticmethod
    def _ready(port: int) -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as reply:
                return bool(reply.status == 200)
        except OSError:
            return False

    def stop(self) -> None:
        """Stop Kueue and take its webhooks away (a stopped Kueue must not refuse objects)."""
        self.kill()
        unregister_webhooks(self.http, self._webhooks)

    def kill(self, sig: int = signal.SIGTERM) -> None:
        """Stop the process (its webhooks stay registered)."""
        if self.proc is not None and self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, sig)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(5)
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None
