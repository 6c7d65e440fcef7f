"""A saved filter decision keeps the fields kube-scheduler's own filters read (taints, tolerations, ...)."""

from __future__ import annotations

from dataclasses import replace

from scheduling.model import NodeSelectorRequirement, NodeSelectorTerm, Taint, Toleration
from scheduling.promises import PromiseBook
from scheduling.queue_gate import AdmittedBook
from scheduling.replay import load_filter, save_filter
from scheduling.session import FilterInput, SessionSettings, filter_pod
from scheduling.topology import TopologyCache
from tests.builders import a_node, a_pod, snapshot_of

NODE = replace(a_node("n1").build(), taints=(Taint("gpu", "reserved", "NoSchedule"),))
POD = replace(
    a_pod("p").gpus(2).build(),
    node_selector={"gpu-type": "h100"},
    tolerations=(Toleration("gpu", "Exists"),),
    affinity=(NodeSelectorTerm((NodeSelectorRequirement("zone", "In", ("a",)),)),),
)


def test_taints_tolerations_selector_and_affinity_survive_a_save_and_a_load() -> None:
    snapshot = snapshot_of([NODE], [POD])
    asked = FilterInput(POD, ("n1",), snapshot, PromiseBook(), None, AdmittedBook(), 1.0)
    outcome = filter_pod(asked, topologies=TopologyCache(), settings=SessionSettings())
    loaded, _, _ = load_filter(save_filter(asked, outcome, SessionSettings()), TopologyCache())
    assert loaded.snapshot.nodes["n1"].taints == NODE.taints
    assert (loaded.pod.tolerations, loaded.pod.affinity) == (POD.tolerations, POD.affinity)
    assert dict(loaded.pod.node_selector) == {"gpu-type": "h100"}
