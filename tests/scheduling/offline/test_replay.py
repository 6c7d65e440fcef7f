"""A saved filter decision keeps what the decision read: node constraints, when groups were last tried."""

from __future__ import annotations

from dataclasses import replace

from scheduling.admission.queue_hold import AdmittedBook, TriedBook
from scheduling.cluster.promises import PromiseBook
from scheduling.model import NodeSelectorRequirement, NodeSelectorTerm, Taint, Toleration
from scheduling.offline.replay import load_filter, replay_filter, save_filter
from scheduling.queues.view import view_of
from scheduling.session import FilterInput, SessionSettings, filter_pod
from scheduling.topology import TopologyCache
from tests.builders import a_node, a_pod, snapshot_of
from tests.scheduling.queues.builders import gpu_queue

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


def test_a_nodes_unhealthy_gpus_and_refusal_survive_a_save_and_a_load() -> None:
    """A replay must see the GPUs the node agent withdrew, or it would place pods on them."""
    node = replace(a_node("n1").build(), unhealthy_gpus=frozenset({1, 5}), gpu_problem=None)
    refused = replace(a_node("n2").build(), gpu_problem="node n2 advertises 4000000 nvidia.com/gpu")
    snapshot = snapshot_of([node, refused], [POD])
    asked = FilterInput(POD, ("n1", "n2"), snapshot, PromiseBook(), None, AdmittedBook(), 1.0)
    outcome = filter_pod(asked, topologies=TopologyCache(), settings=SessionSettings())
    loaded, _, _ = load_filter(save_filter(asked, outcome, SessionSettings()), TopologyCache())
    assert loaded.snapshot.nodes["n1"].unhealthy_gpus == frozenset({1, 5})
    assert loaded.snapshot.nodes["n1"].gpu_indices == node.gpu_indices
    assert loaded.snapshot.nodes["n2"].gpu_problem == refused.gpu_problem


BIG = a_pod("big").gpus(6).queue("a").created("2026-01-01T00:00:00Z").build()
LATE = a_pod("late").gpus(4).queue("a").created("2026-01-02T00:00:00Z").build()


def test_a_replay_reads_when_each_group_was_last_tried() -> None:
    """LATE was let through because BIG had not been tried for a minute; the replay must agree."""
    snapshot = snapshot_of([a_node("n1").build()], [BIG, LATE], queues=[gpu_queue("a", quota=8)])
    view = view_of(snapshot, PromiseBook())
    tried = TriedBook().with_try(BIG.key, 40.0)
    asked = FilterInput(LATE, ("n1",), snapshot, PromiseBook(), view, AdmittedBook(), 100.0, tried)
    settings = SessionSettings()
    outcome = filter_pod(asked, topologies=TopologyCache(), settings=settings)
    assert outcome.feasible == ("n1",)
    now, then = replay_filter(save_filter(asked, outcome, settings), TopologyCache())
    assert now == then
