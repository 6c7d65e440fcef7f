"""The test bed's webhook configurations: the manifests' own, renamed, calling a loopback port.

The placement manager serves two mutating webhooks on one HTTPS port: the pin webhook
(``manifests/pin-webhook.yaml``, path ``/mutate-pods``) and the admission gate
(``manifests/admission-gate-webhook.yaml``, path ``/gate-pods``). The test bed registers the manifests'
configurations as they are, except for the name (``-testbed``, so that applying the manifests, which a
test does as a dry run, does not meet them) and the client configuration (a URL on loopback instead of
the in-cluster Service; its caBundle is the cluster's CA when the test bed made the certificate, else the
placement manager's own, which it writes itself).
"""

from __future__ import annotations

import base64
import contextlib
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from prometheus_client.parser import text_string_to_metric_families

from kubeio.errors import NotFoundError
from kubeio.http import KubeHttp

REPO = Path(__file__).resolve().parents[1]
CONFIGS = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations"

PIN_MANIFEST = "pin-webhook.yaml"
GATE_MANIFEST = "admission-gate-webhook.yaml"


def testbed_name(manifest: str) -> str:
    """The test bed's name of the configuration in ``manifests/<manifest>``."""
    return f"{_configuration(manifest)['metadata']['name']}-testbed"


def webhook_names(manifest: str) -> list[str]:
    """The names of the webhooks of ``manifests/<manifest>``'s configuration."""
    return [str(w["name"]) for w in _configuration(manifest)["webhooks"]]


def webhook_configuration(manifest: str, base_url: str, ca_bundle: str | None) -> dict[str, Any]:
    """``manifests/<manifest>``'s configuration, each webhook calling ``base_url`` + its own path.

    Without ``ca_bundle`` the test bed leaves ``caBundle`` to the placement manager (internal
    certificates): a server-side apply without the field leaves the value another manager wrote.
    """
    config = _configuration(manifest)
    config["metadata"] = {"name": testbed_name(manifest)}
    for webhook in config["webhooks"]:
        path = webhook["clientConfig"]["service"]["path"]
        webhook["clientConfig"] = {"url": f"{base_url}{path}"}
        if ca_bundle is not None:
            webhook["clientConfig"]["caBundle"] = ca_bundle
    return config


def register(http: KubeHttp, manifest: str, *, base_url: str, ca_file: Path | None, enabled: bool) -> None:
    """Register (server-side apply) or delete the test bed's configuration of ``manifest``."""
    path = f"{CONFIGS}/{testbed_name(manifest)}"
    if not enabled:
        with contextlib.suppress(NotFoundError):
            http.request("DELETE", path)
        return
    ca = None if ca_file is None else base64.b64encode(ca_file.read_bytes()).decode()
    http.request(
        "PATCH",
        path,
        query={"fieldManager": "phalanx-testbed", "force": "true"},
        body=webhook_configuration(manifest, base_url, ca),
        content_type="application/apply-patch+yaml",
    )


def wait_callable(
    http: KubeHttp, metrics_url: str, *, probe: bool, alive: Callable[[], None], timeout: float
) -> None:
    """Wait until the placement manager reports each registered test bed webhook callable.

    Its own check (``phalanx_webhook_trusted`` at ``metrics_url``: a TLS handshake against each
    configuration's caBundle) says the configurations are right; with ``probe``, a dry-run pod of
    scheduler ``phalanx`` coming back gated says the API server has read them and calls the gate.
    ``alive`` raises when the placement manager has exited.

    Raises:
        RuntimeError: not so within ``timeout`` seconds.
    """
    manifests = [m for m in (PIN_MANIFEST, GATE_MANIFEST) if _registered(http, m)]
    wanted = {(testbed_name(m), w) for m in manifests for w in webhook_names(m)}
    probe = probe and GATE_MANIFEST in manifests
    deadline = time.monotonic() + timeout
    while not wanted <= _trusted(metrics_url):
        alive()
        if time.monotonic() > deadline:
            msg = f"the placement manager does not report {sorted(wanted)} trusted after {timeout}s"
            raise RuntimeError(msg)
        time.sleep(0.2)
    while probe and not _gated_dry_run(http):
        if time.monotonic() > deadline:
            msg = f"the API server does not gate a dry-run pod of scheduler phalanx after {timeout}s"
            raise RuntimeError(msg)
        time.sleep(0.2)


def _registered(http: KubeHttp, manifest: str) -> bool:
    try:
        http.request("GET", f"{CONFIGS}/{testbed_name(manifest)}")
    except NotFoundError:
        return False
    return True


def _trusted(metrics_url: str) -> set[tuple[str, str]]:
    try:
        with urllib.request.urlopen(metrics_url, timeout=2) as reply:
            text = reply.read().decode()
    except OSError:
        return set()
    return {
        (sample.labels["configuration"], sample.labels["webhook"])
        for family in text_string_to_metric_families(text)
        if family.name == "phalanx_webhook_trusted"
        for sample in family.samples
        if sample.value == 1
    }


def _gated_dry_run(http: KubeHttp) -> bool:
    """Whether a pod of scheduler phalanx created as a dry run comes back with the admission gate."""
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "phalanx-gate-probe"},
        "spec": {"schedulerName": "phalanx", "containers": [{"name": "probe", "image": "probe"}]},
    }
    made = http.request("POST", "/api/v1/namespaces/default/pods", query={"dryRun": "All"}, body=pod)
    gates = (made.get("spec") or {}).get("schedulingGates") or []
    return any(g.get("name") == "phalanx.io/admission" for g in gates)


def _configuration(manifest: str) -> dict[str, Any]:
    documents = yaml.safe_load_all((REPO / "manifests" / manifest).read_text())
    config = next(d for d in documents if d and d.get("kind") == "MutatingWebhookConfiguration")
    return dict(config)
