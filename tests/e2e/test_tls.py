"""kube-scheduler calls the extender over verified TLS: the extender serves HTTPS only, and pods bind.

A test bed of its own (one node), since the session's extender serves plain HTTP on loopback beside
kube-scheduler, as ``manifests/scheduler-config.yaml`` ships it; this is the documented alternative for an
extender reached over a network. Everything else is shipped as it is (gates on, webhooks). The extender gets a
certificate for IP:127.0.0.1 from the local CA, and kube-scheduler's config gets ``enableHTTPS: true``
and a ``tlsConfig`` with that CA (``localcluster.config.render_scheduler_config``). The extender is the
binder, and it answers nothing over plain HTTP, so a pod bound with its GPU annotation was scheduled
through a TLS connection that kube-scheduler verified.
"""

from __future__ import annotations

import ssl
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from localbed import Testbed
from workload import create_pod, ensure_namespace, gpu_pod, gpus_of, live, wait_pod

from testbed.nodes import fleet


@pytest.fixture(scope="module")
def tls_bed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Testbed]:
    """A test bed whose extender serves HTTPS, with one simulated 8-GPU node."""
    bed = Testbed(Path(tmp_path_factory.mktemp("tls-testbed")), extender_tls=True)
    try:
        bed.start()
        bed.add_nodes(fleet(1, gpus=8))
        yield bed
    finally:
        bed.stop()


def test_kube_scheduler_is_configured_to_verify_the_extender(tls_bed: Testbed) -> None:
    config = yaml.safe_load((tls_bed.cluster.state_dir / "scheduler-config.yaml").read_text())
    (extender,) = config["extenders"]
    assert extender["urlPrefix"] == f"https://127.0.0.1:{tls_bed.extender_port}"
    assert extender["tlsConfig"] == {"insecure": False, "caFile": str(tls_bed.cluster.ca_file)}


def test_the_extender_answers_https_only(tls_bed: Testbed) -> None:
    context = ssl.create_default_context(cafile=str(tls_bed.cluster.ca_file))
    with urllib.request.urlopen(
        f"https://127.0.0.1:{tls_bed.extender_port}/healthz", context=context
    ) as reply:
        assert reply.status == 200
    with pytest.raises(ConnectionError):  # a TLS server reading an HTTP request: no handshake, it hangs up
        urllib.request.urlopen(f"http://127.0.0.1:{tls_bed.extender_port}/healthz", timeout=5)
    untrusting = ssl.create_default_context()  # the system roots do not include the local CA
    with pytest.raises(urllib.error.URLError, match="CERTIFICATE_VERIFY_FAILED"):
        urllib.request.urlopen(f"https://127.0.0.1:{tls_bed.extender_port}/healthz", context=untrusting)


def test_a_gpu_pod_is_bound_through_the_extender_over_tls(tls_bed: Testbed) -> None:
    ensure_namespace(tls_bed.http, "tls")
    create_pod(tls_bed.http, "tls", gpu_pod("train", 2))
    pod = wait_pod(tls_bed.http, "tls", "train", "bound by the extender", live)
    assert pod["spec"]["nodeName"] == "gpu-node-1"
    assert len(gpus_of(pod)) == 2, pod["metadata"].get("annotations")
