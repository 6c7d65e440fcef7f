"""Which worker cluster a gang is sent to: the one that places it whole now, on the fewest nodes."""

from __future__ import annotations

from scheduling.cluster.snapshot import ClusterSnapshot
from scheduling.cluster.statement import Statement
from scheduling.dispatch import dispatch
from scheduling.model import Pod
from scheduling.topology import TopologyCache
from tests.builders import a_node, a_pod, snapshot_of

# Worker "frag": 8 GPUs free, but 4 + 4 on two nodes. Worker "whole": 8 free on one node.
FRAG = snapshot_of(
    [a_node("f1").build(), a_node("f2").build()],
    [a_pod("x1").gpus(4).on("f1", range(4)).build(), a_pod("x2").gpus(4).on("f2", range(4)).build()],
    [],
    [],
)
WHOLE = snapshot_of(
    [a_node("w1").build(), a_node("w2").build()], [a_pod("y").gpus(8).on("w2", range(8)).build()], [], []
)


def works(**snapshots: ClusterSnapshot) -> dict[str, Statement]:
    return {name: Statement(snapshot) for name, snapshot in snapshots.items()}


def members(count: int, gpus: int) -> list[Pod]:
    return [a_pod(f"m{i}").gpus(gpus).group("job").build() for i in range(count)]


def test_a_gang_quota_would_fit_anywhere_goes_where_it_fits_whole() -> None:
    decision = dispatch("ml/job", members(1, 8), works(frag=FRAG, whole=WHOLE), TopologyCache())
    assert decision.nominated == "whole"
    assert [f.worker for f in decision.fits] == ["whole", "frag"]
    assert "frag: " in decision.message and "fits whole on 1 node(s) (w1)" in decision.message


def test_of_two_workers_that_fit_the_one_with_fewer_nodes_wins() -> None:
    decision = dispatch("ml/job", members(2, 4), works(frag=FRAG, whole=WHOLE), TopologyCache())
    assert decision.nominated == "whole"
    assert [(f.worker, f.fits, f.nodes) for f in decision.fits] == [("whole", True, 1), ("frag", True, 2)]


def test_when_no_worker_can_hold_it_whole_none_is_nominated_and_each_says_why() -> None:
    decision = dispatch("ml/job", members(3, 8), works(frag=FRAG, whole=WHOLE), TopologyCache())
    assert decision.nominated is None
    assert decision.message.startswith("no worker cluster can place it whole now")
    assert all(not f.fits and f.reason for f in decision.fits)


def test_ties_go_by_name() -> None:
    decision = dispatch("ml/job", members(1, 8), works(b=WHOLE, a=WHOLE), TopologyCache())
    assert decision.nominated == "a"


def test_two_gangs_decided_in_one_pass_do_not_both_take_the_same_gpus() -> None:
    workers = works(frag=FRAG, whole=WHOLE)
    first = dispatch("ml/a", members(1, 8), workers, TopologyCache())
    second = dispatch("ml/b", members(1, 8), workers, TopologyCache())
    assert (first.nominated, second.nominated) == ("whole", None)
