"""Decisive filter on the real kube-scheduler: a pod phalanx decides alone skips Score and ``prioritize``.

kube-scheduler v1.36 takes the only node left after the extenders' filter without scoring
(``schedulePod``); its ``scheduler_framework_extension_point_duration_seconds`` histogram counts every
run of the Score extension point, and the extender counts every ``prioritize`` it answers. A pod with a
preferred node affinity keeps the ranked path, so the same counters move for it: the check can fail.
"""

from __future__ import annotations

import ssl
import urllib.request
from typing import Any

from localbed import Testbed
from workload import create_pod, gpu_pod, running, wait_pod

from tests.e2e.test_single_pod import metric


def scheduler_metric(testbed: Testbed, name: str, **labels: str) -> float:
    """A sample of the test bed kube-scheduler's ``/metrics`` (secure port, admin token), 0 if absent."""
    port = testbed.cluster.ports["kube-scheduler"]
    insecure = ssl.create_default_context()
    insecure.check_hostname = False
    insecure.verify_mode = ssl.CERT_NONE  # kube-scheduler's self-signed serving certificate
    request = urllib.request.Request(
        f"https://127.0.0.1:{port}/metrics",
        headers={"Authorization": f"Bearer {testbed.cluster.admin_token}"},
    )
    with urllib.request.urlopen(request, context=insecure, timeout=10) as reply:
        text = reply.read().decode()
    total = 0.0
    for line in text.splitlines():
        if not line.startswith(name + "{"):
            continue
        head, _, value = line.rpartition(" ")
        if all(f'{k}="{v}"' in head for k, v in labels.items()):
            total += float(value)
    return total


def score_runs(testbed: Testbed) -> float:
    return scheduler_metric(
        testbed,
        "scheduler_framework_extension_point_duration_seconds_count",
        extension_point="Score",
        profile="phalanx",
    )


def counters(testbed: Testbed) -> tuple[float, float, float]:
    """Score runs, prioritize calls, and filter replies with one node (decided, or a hinted node alone)."""
    return (
        score_runs(testbed),
        metric(testbed, "phalanx_extender_requests_total", outcome="ok", verb="prioritize"),
        sum(metric(testbed, "phalanx_extender_filter_answers_total", path=p) for p in ("decisive", "single")),
    )


def preferring(name: str, node: str) -> dict[str, Any]:
    pod = gpu_pod(name, 1)
    pod["spec"]["affinity"] = {
        "nodeAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 10,
                    "preference": {
                        "matchExpressions": [
                            {"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}
                        ]
                    },
                }
            ]
        }
    }
    return pod


def test_a_decided_pod_skips_score_and_prioritize_and_a_preferring_pod_does_not(
    testbed: Testbed, namespace: str
) -> None:
    score0, prioritize0, decisive0 = counters(testbed)
    create_pod(testbed.http, namespace, gpu_pod("decided", 1))
    wait_pod(testbed.http, namespace, "decided", "running", running, timeout=120)
    score1, prioritize1, decisive1 = counters(testbed)
    assert decisive1 >= decisive0 + 1  # answered with one node
    assert (score1, prioritize1) == (score0, prioritize0), "a decided pod was scored"

    create_pod(testbed.http, namespace, preferring("ranked", "gpu-node-3"))
    wait_pod(testbed.http, namespace, "ranked", "running", running, timeout=120)
    score2, prioritize2, _ = counters(testbed)
    assert score2 >= score1 + 1
    assert prioritize2 >= prioritize1 + 1
