"""Build the real Flask app over an in-memory cluster made from the shared captured fixtures."""

from __future__ import annotations

from pathlib import Path

import orjson
import yaml
from flask import Flask
from prometheus_client import CollectorRegistry

from extender.app import create_app
from extender.extender_settings import ExtenderSettings
from extender.service import Extender
from kubeio.convert import node_from_api, pod_from_api
from tests.builders import FakeBinder, FakeCluster


def fixture_cluster(shared: Path) -> FakeCluster:
    """The three 8-GPU nodes of the capture, and the pods the captured requests name."""
    manifests = shared / "fixtures" / "extender" / "manifests"
    status = orjson.loads((manifests / "node-status-patch.json").read_bytes())["status"]
    cluster = FakeCluster()
    for i in (1, 2, 3):
        raw = yaml.safe_load((manifests / f"node-gpu-node-{i}.yaml").read_text())
        raw["status"] = status
        cluster.add(node_from_api(raw))
    for mode in ("nodecache-true", "nodecache-false"):
        request = orjson.loads((shared / "fixtures" / "extender" / mode / "filter.request.json").read_bytes())
        cluster.add(pod_from_api(request["Pod"]))
    return cluster


def make_app(
    cluster: FakeCluster, *, max_body_bytes: int = 1 << 20
) -> tuple[Flask, Extender, FakeBinder, CollectorRegistry]:
    binder = FakeBinder(cluster)
    service = Extender(cluster, binder, clock=lambda: 0.0, promise_ttl=60.0)
    registry = CollectorRegistry()
    settings = ExtenderSettings(max_body_bytes=max_body_bytes)
    app = create_app(settings, service, registry=registry, ready=lambda: True)
    return app, service, binder, registry
