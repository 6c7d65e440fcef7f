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
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from kubeio.errors import NotFoundError
from kubeio.http import KubeHttp

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
    multikueue: bool = False,
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
    if multikueue:
        # The manager's dispatch loop: short so that a test sees a lost worker within seconds.
        config["multiKueue"] = {"gcInterval": "10s", "origin": "phalanx-testbed", "workerLostTimeout": "30s"}
    return yaml.safe_dump(config, sort_keys=False)


def install_crds(kubectl: Any, bins: Path) -> None:
    """Apply Kueue's CRDs (server-side: some are too large for client-side apply) and wait for them."""
    crds = sorted(bins.glob("kueue.x-k8s.io_*.yaml"))
    args: list[str] = []
    for crd in crds:
        args += ["-f", str(crd)]
    kubectl("apply", "--server-side", "--force-conflicts", *args)
    kubectl("wait", "--for=condition=Established", "--timeout=60s", *args)
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
