"""Parity: one cluster, asked of the extender's filter/prioritize and of the simulator's phalanx policy.

The extender (``extender.service.Extender``, what its HTTP routes call) reserves a gang at its first
member's filter; the simulator's policy places the same gang through ``scheduling.offline.cycle``. Both must
give every member the same node and GPU indices, and kube-scheduler's choice from the extender's scores
(``pick_node``) must be the node the simulator bound the first member to.
"""

from __future__ import annotations

from dataclasses import replace
from typing import cast

from immutables import Map

from extender.gang_bind import GangBinder
from extender.service import Extender
from scheduling.offline.cycle import active_queue_order, pick_node
from simulator.loop import ClusterView, JobView
from simulator.policies.phalanx import Phalanx, PhalanxState
from simulator.simulated_cluster import Worker, job_group, job_of, job_pods, make_nodes
from tests.builders import FakeBinder, FakeCluster

NOW = 120


def test_extender_reserves_the_gang_where_the_simulator_places_it() -> None:
    """R holds 3 GPUs of n00; g (6 GPUs: a 4-GPU and a 2-GPU worker) arrives: n01 takes 4, n02 takes 2."""
    nodes = make_nodes(3, 4)
    running = {"r": (Worker(3, "n00", (0, 1, 2), 60),)}
    view = ClusterView(
        now=NOW,
        nodes=(4, 4, 4),
        jobs=(JobView("r", 0, 3, (0, 0, 0), 0), JobView("g", 100, 6, (), 0)),
        seed=0,
    )
    state, allocations = Phalanx(elastic=False).decide(PhalanxState(Map(running)), view)
    simulated = {i: (w.node, w.indices) for i, w in enumerate(state.workers["g"])}

    waiting = job_pods("g", [Worker(4), Worker(2)], queue="default", submitted=100)
    pods = [
        *job_pods("r", running["r"], queue="default", submitted=0),
        *(replace(p, gates=()) for p in waiting),
    ]
    cluster = FakeCluster().add(*nodes, *pods, job_group("r", 1), job_group("g", 2))
    extender = Extender(
        cluster,
        FakeBinder(cluster),
        clock=lambda: float(NOW),
        promise_ttl=60.0,
        gangs=cast(GangBinder, object()),
    )
    first = active_queue_order(p for p in pods if p.group == "g")[0]
    names = tuple(node.name for node in nodes)
    decision = extender.filter(first, names)
    reserved = {job_of(p.pod_key)[1]: (p.node, p.gpus) for p in extender.promises.by_uid.values()}

    assert simulated == {0: ("n01", (0, 1, 2, 3)), 1: ("n02", (0, 1))}
    assert reserved == simulated
    assert pick_node(extender.prioritize(first, decision.feasible)) == simulated[0][0]
    assert allocations["g"] == (1, 1, 1, 1, 2, 2)
