"""Every object phalanx refuses gets one Warning event saying why, on the object itself."""

from __future__ import annotations

from kubeio.cluster_cache import ClusterCache
from placement.refusal_pass import RefusalPass
from tests.builders import FakeEvents
from tests.kubeio.test_cluster_cache import absurd_node, raw_node, raw_pod


def test_each_refused_object_is_told_once_and_again_only_if_it_is_refused_anew() -> None:
    cache = ClusterCache()
    events = FakeEvents()
    reporter = RefusalPass(cache.refusals.all, events)
    cache.replace_nodes([raw_node("n1"), absurd_node("big", "4000000")])
    broken = raw_pod("u1", "n1", (0,))
    broken["spec"]["containers"] = "not a list"
    cache.replace_pods([broken])
    assert [(r.kind, r.key) for r in reporter.run()] == [("Node", "big"), ("Pod", "ml/pod-u1")]
    assert reporter.run() == (), "told once"
    [node, pod] = events.events
    assert node[:4] == ("Node", "big", "Warning", "Refused")
    assert node[4].startswith("phalanx refuses this Node: node big advertises 4000000 nvidia.com/gpu")
    assert pod[:4] == ("Pod", "pod-u1", "Warning", "Refused")
    [refusal, _] = cache.refusals.all()
    assert (refusal.ref.api_version, refusal.ref.uid) == ("v1", "uid-big")
    cache.node_event("MODIFIED", absurd_node("big", "8"))
    assert reporter.run() == ()
    cache.node_event("MODIFIED", absurd_node("big", "5000000"))
    assert [r.reason.split(" ")[3] for r in reporter.run()] == ["5000000"]
