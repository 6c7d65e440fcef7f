"""The dashboard and alerting rules name metrics the real extender and placement manager expose.

Every expression of ``manifests/monitoring/`` is parsed and each metric name its selectors read must be
offered by the ``/metrics`` of the extender (under gunicorn) or of a placement manager replica on the test
bed. Offered means a ``# TYPE`` line: a labelled family shows one before its first sample, so the check
does not depend on which label sets this session happened to create. Some traffic is made first anyway
(one GPU pod, one gang that cannot fit), and the figures the new collector computes are checked on it.
"""

from __future__ import annotations

import signal
import urllib.error
import urllib.request

import pytest
from localbed import Testbed, free_port
from workload import (
    create_pod,
    create_podgroup,
    gpu_pod,
    member,
    metric_value,
    podgroup,
    running,
    scrape,
    wait_for,
    wait_pod,
)

from tests.promql import exposed_names, selected_names, shipped_expressions


def placement_pages(testbed: Testbed) -> dict[str, str]:
    return {
        name: scrape(f"http://127.0.0.1:{port}/metrics")
        for name, port in testbed.placement_metrics_ports.items()
        if testbed.is_running(name)
    }


def test_every_metric_a_panel_or_rule_names_is_exposed(testbed: Testbed, namespace: str) -> None:
    create_pod(testbed.http, namespace, gpu_pod("train", 1))
    wait_pod(testbed.http, namespace, "train", "running", running)
    create_podgroup(testbed.http, namespace, podgroup("too-big", 2, timeout_seconds=1))
    for i in range(2):
        create_pod(testbed.http, namespace, member(f"w{i}", "too-big", 9))  # no node has 9 GPUs

    def late_gang_seen() -> dict[str, str] | None:
        pages = placement_pages(testbed)
        late = [metric_value(page, "phalanx_gangs_past_timeout", size="2") for page in pages.values()]
        return pages if any(value and value >= 1 for value in late) else None

    pages = wait_for("the placement manager to report the gang past its timeout", late_gang_seen, timeout=60)
    extender = scrape(testbed.extender_url + "/metrics")
    assert metric_value(extender, "phalanx_extender_requests_total", verb="bind", outcome="ok")
    for name, page in pages.items():
        assert metric_value(page, "phalanx_node_gpus", node="gpu-node-1", kind="total") == 8, name
        allocated = metric_value(page, "phalanx_node_gpus", node="gpu-node-1", kind="allocated")
        free = metric_value(page, "phalanx_node_gpus", node="gpu-node-1", kind="free")
        assert allocated is not None and free is not None and allocated + free == 8, name
    assert sum(metric_value(page, "phalanx_placement_leader") or 0 for page in pages.values()) == 1

    offered = exposed_names(extender).union(*(exposed_names(page) for page in pages.values()))
    missing = {
        expression.where: sorted(selected_names(expression.promql) - offered)
        for expression in shipped_expressions()
        if selected_names(expression.promql) - offered
    }
    assert not missing, f"metrics named by the dashboard or rules but exposed by neither process: {missing}"


def test_the_extender_serves_metrics_alone_on_its_metrics_port(testbed: Testbed) -> None:
    """As shipped (``PHALANX_METRICS_PORT``): /metrics on a port of its own, the verbs not there."""
    port = free_port()
    testbed.kill_extender(signal.SIGTERM)
    testbed.start_extender({"PHALANX_METRICS_PORT": str(port)})
    try:
        page = scrape(f"http://127.0.0.1:{port}/metrics")
        assert "phalanx_extender_requests_total" in exposed_names(page) or "phalanx_extender_requests" in page
        request = urllib.request.Request(f"http://127.0.0.1:{port}/filter", data=b"{}", method="POST")
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=5)
        assert refused.value.code == 405, "no verb is served on the metrics port"
        refused.value.close()
    finally:
        testbed.kill_extender(signal.SIGTERM)
        testbed.start_extender()
