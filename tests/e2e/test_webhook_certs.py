"""The webhooks' certificates on the real control plane: kept, reloaded, and loud when they are wrong.

One test bed with admission gates on, as shipped. Its placement manager starts with internal
certificates (the default): it makes its CA and serving certificate in a Secret, writes the CA into both
webhook configurations, repairs a wrong caBundle and serves renewed certificates without a restart;
two writers of the Secret at once end with one CA (the API server's 409s, real). Then the test bed
restarts it with a certificate of the cluster's CA in files (``files_mode``), as with cert-manager or an
admin: a gate webhook without caBundle (the admin guide's old recipe) is reported by an event, a metric,
an ERROR line and a failing ``/readyz``, a pod created meanwhile is caught as having bypassed the gate,
and everything clears once the caBundle is right; rotated files are served without a restart. Last, the
admin guide's openssl recipe, run as written, gives both configurations the CA.
"""

from __future__ import annotations

import base64
import contextlib
import functools
import json
import os
import re
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from bed_webhooks import CONFIGS, GATE_MANIFEST, PIN_MANIFEST, webhook_names
from bed_webhooks import testbed_name as bed_name
from cryptography import x509
from localbed import Testbed
from workload import (
    create_pod,
    delete_pods,
    ensure_namespace,
    get_pod,
    gpu_pod,
    metric_value,
    scrape,
    wait_for,
)

from kubeio.errors import NotFoundError
from kubeio.secrets import SecretStore, StoredSecret
from kubeio.webhook_configs import WebhookConfigs
from placement.cert_keeper import CertKeeper
from placement.certificates import KeyPair, WebhookCerts, make_ca, make_serving
from placement.serving_tls import ServingTls, files_loader
from placement.webhook import GATE_PATH, MUTATE_PATH, serve_webhook
from placement.webhook_trust import OwnServer, check_configuration
from scheduling.model import ADMISSION_GATE, GATE_STAMP
from testbed.nodes import fleet
from tests.conftest import REPO

PIN, GATE = bed_name(PIN_MANIFEST), bed_name(GATE_MANIFEST)
(PIN_HOOK,), (GATE_HOOK,) = webhook_names(PIN_MANIFEST), webhook_names(GATE_MANIFEST)
SECRET = "/api/v1/namespaces/kube-system/secrets/phalanx-placement-webhook-certs"
WINDOW = 8
"""``--gate-bypass-unready-seconds`` here: how long the leader is not ready after a bypass."""


@pytest.fixture(scope="module")
def bed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Testbed]:
    """A test bed with admission gates on and internal certificates; one 8-GPU node."""
    testbed = Testbed(
        Path(tmp_path_factory.mktemp("certs")),
        admission_gates=True,
        placement_args=("--gate-bypass-unready-seconds", str(WINDOW)),
    )
    try:
        testbed.start()
        testbed.add_nodes(fleet(1, gpus=8))
        yield testbed
    finally:
        testbed.stop()


@pytest.fixture
def ns(bed: Testbed, request: pytest.FixtureRequest) -> Iterator[str]:
    name = f"certs-{int(time.time() * 1000) % 10_000_000}"
    ensure_namespace(bed.http, name)
    yield name
    delete_pods(bed.http, name, timeout=30)


def metrics(bed: Testbed) -> str:
    return scrape(f"http://127.0.0.1:{bed.placement_metrics_ports['placement']}/metrics")


def trusted(bed: Testbed, config: str, webhook: str) -> float | None:
    return metric_value(metrics(bed), "phalanx_webhook_trusted", configuration=config, webhook=webhook)


def readyz(bed: Testbed) -> tuple[int, str]:
    url = f"http://127.0.0.1:{bed.placement_metrics_ports['placement']}/readyz"
    try:
        with urllib.request.urlopen(url, timeout=10) as reply:
            return reply.status, reply.read().decode()
    except urllib.error.HTTPError as exc:
        with exc:
            return exc.code, exc.read().decode()


def ca_bundles(bed: Testbed, config: str) -> list[bytes]:
    webhooks = bed.http.request("GET", f"{CONFIGS}/{config}")["webhooks"]
    return [base64.b64decode(w["clientConfig"].get("caBundle") or "") for w in webhooks]


def set_ca_bundle(bed: Testbed, config: str, bundle: bytes | None) -> None:
    """As an admin would with kubectl: set (or remove) the caBundle of the configuration's one webhook."""
    op: dict[str, Any] = {"op": "remove", "path": "/webhooks/0/clientConfig/caBundle"}
    if bundle is not None:
        op = {
            "op": "add",
            "path": "/webhooks/0/clientConfig/caBundle",
            "value": base64.b64encode(bundle).decode(),
        }
    bed.http.request("PATCH", f"{CONFIGS}/{config}", body=[op], content_type="application/json-patch+json")


def trusts_only(bed: Testbed, config: str, ca: bytes) -> bool:
    return ca_bundles(bed, config) == [ca]


def secret_data(bed: Testbed) -> dict[str, bytes]:
    data = bed.http.request("GET", SECRET).get("data") or {}
    return {k: base64.b64decode(v) for k, v in data.items()}


def served(bed: Testbed) -> x509.Certificate:
    """The certificate the webhook port serves now (read without verifying it)."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    with (
        socket.create_connection(("127.0.0.1", bed.webhook_port), timeout=10) as raw,
        context.wrap_socket(raw) as tls,
    ):
        der = tls.getpeercert(binary_form=True)
    assert der is not None
    return x509.load_der_x509_certificate(der)


def dry_run(bed: Testbed) -> dict[str, Any]:
    """A pod of scheduler phalanx created as a dry run, as the API server's webhooks leave it."""
    pod = gpu_pod("probe", 0)
    return bed.http.request("POST", "/api/v1/namespaces/default/pods", query={"dryRun": "All"}, body=pod)


def gated(pod: Mapping[str, Any]) -> bool:
    return {"name": ADMISSION_GATE} in (pod["spec"].get("schedulingGates") or [])


def events(bed: Testbed, namespace: str, name: str, reason: str) -> list[dict[str, Any]]:
    query = {"fieldSelector": f"involvedObject.name={name},reason={reason}"}
    return list(bed.http.request("GET", f"/api/v1/namespaces/{namespace}/events", query=query)["items"])


def test_internal_certificates_are_made_kept_in_a_secret_and_trusted_by_both_configurations(
    bed: Testbed, ns: str
) -> None:
    data = secret_data(bed)
    assert set(data) == {"ca.crt", "ca.key", "tls.crt", "tls.key"}
    for config in (PIN, GATE):
        assert ca_bundles(bed, config) == [data["ca.crt"]], f"{config} trusts the Secret's CA"
    assert served(bed).serial_number == x509.load_pem_x509_certificate(data["tls.crt"]).serial_number
    assert trusted(bed, PIN, PIN_HOOK) == 1
    assert trusted(bed, GATE, GATE_HOOK) == 1
    assert readyz(bed) == (200, "ok\n")
    created = create_pod(bed.http, ns, gpu_pod("gated", 1))
    stamp = (created["metadata"].get("annotations") or {}).get(GATE_STAMP)
    assert stamp == "answered", "the API server called the gate webhook over TLS it verified"
    assert gated(dry_run(bed)), "and gates a pod there (a dry run: the door never lets one in)"
    wait_for("the pod released and bound", lambda: get_pod(bed.http, ns, "gated")["spec"].get("nodeName"))


def test_a_wrong_ca_bundle_is_put_right_by_the_placement_manager_alone(bed: Testbed) -> None:
    right = secret_data(bed)["ca.crt"]
    set_ca_bundle(bed, GATE, make_ca(datetime.now(UTC)).cert)
    wait_for("the gate configuration's CA written back", lambda: ca_bundles(bed, GATE) == [right], timeout=30)
    wait_for("the API server gating again", lambda: gated(dry_run(bed)), timeout=30)


def test_an_emptied_secret_gets_new_certificates_served_and_trusted_without_a_restart(bed: Testbed) -> None:
    pid, before = bed.pid("placement"), served(bed).serial_number
    raw = bed.http.request("GET", SECRET)
    bed.http.request("PUT", SECRET, body={**raw, "data": {}})  # an admin forcing a new CA

    def renewed() -> dict[str, bytes] | None:
        data = secret_data(bed)
        return data if len(data) == 4 else None

    fresh = wait_for("new certificates in the Secret", renewed)
    serial = x509.load_pem_x509_certificate(fresh["tls.crt"]).serial_number
    assert serial != before
    wait_for("the new certificate served", lambda: served(bed).serial_number == serial, timeout=30)
    for config in (PIN, GATE):
        wait_for(f"{config} with the new CA", functools.partial(trusts_only, bed, config, fresh["ca.crt"]))
    wait_for("the API server gating with the new certificate", lambda: gated(dry_run(bed)), timeout=30)
    assert bed.pid("placement") == pid, "no restart"


def test_a_pod_created_while_no_replica_serves_the_gate_is_reported_as_a_bypass(
    bed: Testbed, ns: str
) -> None:
    bed.kill_placement(signal.SIGKILL)  # the only replica: the API server's calls are refused
    try:
        created = create_pod(bed.http, ns, gpu_pod("unguarded", 1))
        assert not gated(created), "failurePolicy: Ignore lets it through ungated"
        assert GATE_STAMP not in (created["metadata"].get("annotations") or {}), "and unstamped"
    finally:
        bed.start_placement()
    (bypass,) = wait_for(
        "the bypass reported", lambda: events(bed, ns, "unguarded", "GateBypassed"), timeout=60
    )
    assert bypass["type"] == "Warning" and "outside the queues' fair order" in bypass["message"]
    assert metric_value(metrics(bed), "phalanx_gate_bypassed_pods_total") == 1
    status, body = readyz(bed)
    assert status == 503 and f"pod {ns}/unguarded was created around the admission gate" in body, body
    wait_for("ready once the bypass is older than the window", lambda: readyz(bed) == (200, "ok\n"))
    assert len(events(bed, ns, "unguarded", "GateBypassed")) == 1, "reported once"


class PausedStore:
    """The real Secret store; its first read returns, then waits until ``go`` is set (a slow replica)."""

    def __init__(self, store: SecretStore, go: threading.Event, read_done: threading.Event) -> None:
        self._store, self._go, self._read_done = store, go, read_done

    def read(self, namespace: str, name: str) -> StoredSecret | None:
        found = self._store.read(namespace, name)
        if not self._read_done.is_set():
            self._read_done.set()
            assert self._go.wait(60)
        return found

    def create(self, namespace: str, name: str, data: Mapping[str, bytes], labels: Mapping[str, str]) -> bool:
        return self._store.create(namespace, name, data, labels)

    def update(self, secret: StoredSecret, data: Mapping[str, bytes]) -> bool:
        return self._store.update(secret, data)


@pytest.mark.parametrize("shipped_empty", [False, True], ids=["no Secret yet", "the manifests' empty Secret"])
def test_two_replicas_writing_the_secret_at_once_agree_on_one_ca(bed: Testbed, shipped_empty: bool) -> None:
    name = f"race-{'empty' if shipped_empty else 'none'}"
    path = f"/api/v1/namespaces/kube-system/secrets/{name}"
    store = SecretStore(bed.http)
    if shipped_empty:
        body = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name}, "type": "Opaque"}
        bed.http.request("POST", "/api/v1/namespaces/kube-system/secrets", body=body)
    go, read_done = threading.Event(), threading.Event()
    slow = CertKeeper(
        PausedStore(store, go, read_done),
        "kube-system",
        name,
        names=["127.0.0.1"],
        clock=lambda: datetime.now(UTC),
    )
    fast = CertKeeper(store, "kube-system", name, names=["127.0.0.1"], clock=lambda: datetime.now(UTC))
    kept: list[WebhookCerts] = []
    thread = threading.Thread(target=lambda: kept.append(slow.sync()))
    try:
        thread.start()
        assert read_done.wait(60), "the slow replica read the Secret"
        won = fast.sync()  # writes while the slow one holds a stale read
        go.set()
        thread.join(60)
        assert kept == [won], "the slow replica lost the write (409) and took what the other wrote"
        stored = WebhookCerts.from_data(store.read("kube-system", name).data)  # type: ignore[union-attr]
        assert stored == won
    finally:
        go.set()
        bed.http.request("DELETE", path)


@pytest.fixture(scope="module")
def files_mode(bed: Testbed) -> Iterator[Testbed]:
    """The placement manager restarted with a certificate of the cluster CA in files (as cert-manager)."""
    restart(bed, "files")
    yield bed
    restart(bed, "internal")


def restart(bed: Testbed, certs: str) -> None:
    bed.webhook_certs = certs
    bed.kill_placement(signal.SIGTERM)
    bed.start_placement()


def test_an_untrusted_gate_webhook_is_loud_a_bypass_is_caught_and_both_clear_once_fixed(
    files_mode: Testbed, ns: str
) -> None:
    bed = files_mode
    set_ca_bundle(bed, GATE, None)  # the admin guide's old recipe: the CA set on the pin webhook only
    wait_for("the gate webhook reported untrusted", lambda: trusted(bed, GATE, GATE_HOOK) == 0, timeout=30)
    assert trusted(bed, PIN, PIN_HOOK) == 1
    status, body = readyz(bed)
    assert status == 503 and f"cannot call webhook {GATE_HOOK} of {GATE}: its caBundle is empty" in body, body

    def told() -> list[dict[str, Any]]:  # (one may be older: a check before the bed registered its CA)
        found = events(bed, "default", GATE, "WebhookUntrusted")
        return [e for e in found if "its caBundle is empty" in e["message"]]

    untrusted, *_ = wait_for("the Warning event", told)
    assert untrusted["type"] == "Warning"
    assert untrusted["involvedObject"]["kind"] == "MutatingWebhookConfiguration"
    assert "failurePolicy: Ignore" in untrusted["message"], untrusted["message"]
    listed = bed.cluster.kubectl(
        "get", "events", "-n", "default", "--field-selector", f"involvedObject.name={GATE}"
    )
    assert "WebhookUntrusted" in listed.stdout
    assert "WebhookUntrusted" in bed.cluster.kubectl("describe", "mutatingwebhookconfiguration", GATE).stdout
    log = (bed.logs / "placement.log").read_text()
    assert re.search(rf" ERROR .*cannot call webhook {GATE_HOOK}", log), "an ERROR line in the log"

    wait_for("the API server failing the gate webhook", lambda: not gated(dry_run(bed)), timeout=30)
    created = create_pod(bed.http, ns, gpu_pod("around", 1))
    assert not gated(created) and GATE_STAMP not in (created["metadata"].get("annotations") or {})
    (bypass,) = wait_for("the bypass reported", lambda: events(bed, ns, "around", "GateBypassed"), timeout=30)
    assert bypass["type"] == "Warning" and GATE in bypass["message"]
    assert (metric_value(metrics(bed), "phalanx_gate_bypassed_pods_total") or 0) >= 1
    status, body = readyz(bed)
    assert status == 503 and f"pod {ns}/around was created around the admission gate" in body, body
    why = subprocess.run(
        [
            sys.executable,
            "-m",
            "cli",
            "--kubeconfig",
            str(bed.kubeconfig),
            "why",
            f"{ns}/around",
            "-o",
            "json",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert "GateBypassed" in [e["reason"] for e in json.loads(why.stdout)["events"]], why.stdout + why.stderr

    bed.set_admission_gate(enabled=True)  # the test bed's registration: the caBundle is the cluster CA
    wait_for("the gate webhook trusted again", lambda: trusted(bed, GATE, GATE_HOOK) == 1, timeout=30)
    wait_for("the Normal event", lambda: events(bed, "default", GATE, "WebhookTrusted"))
    wait_for("ready again once the bypass is older than the window", lambda: readyz(bed) == (200, "ok\n"))
    wait_for("the API server gating again", lambda: gated(dry_run(bed)), timeout=30)


def write_atomically(path: Path, data: bytes) -> None:
    """As the kubelet updates a mounted Secret: the new file appears whole, never half-written."""
    tmp = path.with_name(path.name + ".new")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def test_rotated_certificate_files_are_served_without_a_restart(files_mode: Testbed) -> None:
    bed = files_mode
    crt, key = bed.cluster.ca_file.parent / "pin-webhook.crt", bed.cluster.ca_file.parent / "pin-webhook.key"
    original = KeyPair(crt.read_bytes(), key.read_bytes())
    pid = bed.pid("placement")
    now = datetime.now(UTC)
    ca = make_ca(now)
    rotated = make_serving(ca, ["127.0.0.1"], now)
    try:
        write_atomically(key, rotated.key)
        write_atomically(crt, rotated.cert)
        serial = x509.load_pem_x509_certificate(rotated.cert).serial_number
        wait_for("the rotated certificate served", lambda: served(bed).serial_number == serial, timeout=30)
        for config in (PIN, GATE):
            set_ca_bundle(bed, config, ca.cert)  # the new CA only: the old certificate would fail now
        wait_for(
            "both webhooks trusted", lambda: trusted(bed, PIN, PIN_HOOK) == trusted(bed, GATE, GATE_HOOK) == 1
        )
        wait_for("the API server gating with the new certificate", lambda: gated(dry_run(bed)), timeout=30)
        assert bed.pid("placement") == pid, "no restart"
    finally:
        write_atomically(key, original.key)
        write_atomically(crt, original.cert)
        bed.set_pin_webhook(enabled=True, wait=False)  # the gate still holds the rotated CA
        bed.set_admission_gate(enabled=True)  # waits until both are trusted and the API server gates


def recipe() -> str:
    """The admin guide's own-certificate recipe: its shell block that makes the CA."""
    text = (REPO / "docs" / "admin-guide.md").read_text()
    blocks = re.findall(r"```sh\n(.*?)```", text, re.DOTALL)
    (block,) = [str(b) for b in blocks if "openssl req -x509" in b]
    return block


def test_the_admin_guides_openssl_recipe_gives_every_webhook_the_ca(bed: Testbed, tmp_path: Path) -> None:
    """Run as written, on the manifests' configurations: both carry the CA that signed the certificate."""
    ensure_namespace(bed.http, "phalanx-system")
    configs = [
        d
        for m in (PIN_MANIFEST, GATE_MANIFEST)
        for d in yaml.safe_load_all((REPO / "manifests" / m).read_text())
        if d and d["kind"] == "MutatingWebhookConfiguration"
    ]
    names = [str(c["metadata"]["name"]) for c in configs]
    bed.cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(configs))
    tls_secret = "/api/v1/namespaces/phalanx-system/secrets/phalanx-placement-webhook-tls"
    try:
        env = {
            **os.environ,
            "KUBECONFIG": str(bed.kubeconfig),
            "PATH": f"{bed.cluster.bin_dir}:{os.environ['PATH']}",
        }
        done = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", recipe()],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        ca = (tmp_path / "ca.crt").read_bytes()
        for name in names:
            assert ca_bundles(bed, name) == [ca], f"{name} trusts the recipe's CA"
        assert bed.http.request("GET", tls_secret)["type"] == "kubernetes.io/tls"
        tls = ServingTls(files_loader(str(tmp_path / "tls.crt"), str(tmp_path / "tls.key")))
        assert tls.reload()
        server = serve_webhook({MUTATE_PATH: ok, GATE_PATH: ok}, host="127.0.0.1", port=0, tls=tls)
        try:
            own = OwnServer(
                "127.0.0.1",
                int(server.server_address[1]),
                {MUTATE_PATH, GATE_PATH},
                ("phalanx-system", "phalanx-placement-webhook"),
                GATE_PATH,
            )
            for name in names:
                config = WebhookConfigs(bed.http).read(name)
                assert config is not None
                assert [t.problem for t in check_configuration(config, own)] == [None], name
        finally:
            server.shutdown()
            server.server_close()
    finally:
        for name in names:
            bed.http.request("DELETE", f"{CONFIGS}/{name}")
        with contextlib.suppress(NotFoundError):
            bed.http.request("DELETE", tls_secret)


def ok(_body: bytes) -> tuple[int, bytes]:
    return 200, b"{}"
