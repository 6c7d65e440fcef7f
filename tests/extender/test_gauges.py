"""Gauges of held state are read at scrape time, so a quiet extender does not show stale numbers.

Found by hack/soak: 90 s after the last pod was gone, /metrics still showed 49 open promises, the value
set at the last bind, although the promises had ended since.
"""

from __future__ import annotations

from dataclasses import replace

import orjson
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import SHARED
from tests.extender.appkit import fixture_cluster, make_app


def _gauge(text: str, name: str) -> float:
    (family,) = [f for f in text_string_to_metric_families(text) if f.name == name]
    return float(family.samples[0].value)


def test_open_promises_fall_to_zero_when_the_cache_shows_the_pod_bound_without_another_call() -> None:
    cluster = fixture_cluster(SHARED)
    app, service, _, _ = make_app(cluster)
    client = app.test_client()
    request = orjson.loads(
        (SHARED / "fixtures" / "extender" / "nodecache-false" / "bind.request.json").read_bytes()
    )
    reply = client.post("/bind", data=orjson.dumps(request), content_type="application/json")
    assert reply.status_code == 200 and not orjson.loads(reply.data).get("Error"), reply.data
    assert _gauge(client.get("/metrics").text, "phalanx_extender_open_promises") == 1
    pod = cluster.pod(request["PodNamespace"], request["PodName"])
    assert pod is not None
    service.pod_changed(pod, replace(pod, node_name=request["Node"]))  # the cache sees it bound
    assert _gauge(client.get("/metrics").text, "phalanx_extender_open_promises") == 0


def test_decisions_kept_counts_the_turn_downs_kept_for_debug() -> None:
    cluster = fixture_cluster(SHARED)
    app, _, _, _ = make_app(cluster)
    client = app.test_client()
    assert _gauge(client.get("/metrics").text, "phalanx_extender_decisions_kept") == 0
    request = orjson.loads(
        (SHARED / "fixtures" / "extender" / "nodecache-false" / "filter.request.json").read_bytes()
    )
    for container in request["Pod"]["spec"]["containers"]:
        for kind in ("requests", "limits"):
            container["resources"][kind]["nvidia.com/gpu"] = "16"  # more than any 8-GPU node has
    reply = client.post("/filter", data=orjson.dumps(request), content_type="application/json")
    assert reply.status_code == 200 and not orjson.loads(reply.data).get("Nodes", {}).get("items"), reply.data
    assert _gauge(client.get("/metrics").text, "phalanx_extender_decisions_kept") == 1
