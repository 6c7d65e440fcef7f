from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from scheduling.elastic import ElasticJob, ElasticSettings, plan_elastic
from scheduling.elastic.layout import Layout
from scheduling.elastic.throughput import Sample, Throughput, fit
from scheduling.plan import Migration, Plan, Resize
from scheduling.topology import TopologyCache
from tests.builders import a_node, snapshot_of
from tests.scheduling.elastic.builders import a_job

NODES = [a_node(f"n{i}").gpus(8).build() for i in range(1, 5)]


def plan(
    jobs: list[ElasticJob],
    *,
    pool: int = 0,
    last_moved: dict[str, float] | None = None,
    guards: ElasticSettings | None = None,
) -> Plan:
    pods = [p for job in jobs for p in job.workers]
    held = sum(p.requests.gpus for p in pods if p.node_name)
    result, _ = plan_elastic(
        jobs,
        snapshot_of(NODES, pods),
        pool_gpus=pool or held,
        deficits={"q": 0},
        now=100.0,
        last_moved=last_moved or {},
        settings=guards or ElasticSettings(),
        topologies=TopologyCache(),
    )
    return result


def test_a_job_spread_over_three_nodes_moves_one_worker_a_round_to_its_biggest_node() -> None:
    job = a_job("spread", ["n1", "n1", "n2", "n3"], low=2, high=4)
    moved = plan([job]).migrations
    assert [(m.pod, m.source, m.target) for m in moved] == [("ml/spread-worker-3", "n3", "n1")]
    assert moved[0].reason == "moved spread-worker-3 from n3 to n1 to fit ml/spread on 1 node, not 3"


def test_a_job_at_its_minimum_is_never_moved() -> None:
    job = a_job("tight", ["n1", "n1", "n2", "n3"], low=4, high=4)
    assert plan([job]).migrations == ()


def test_a_job_moved_within_the_cooldown_waits() -> None:
    job = a_job("spread", ["n1", "n1", "n2", "n3"], low=2, high=4)
    assert plan([job], last_moved={"ml/spread": 90.0}).migrations == ()
    assert plan([job], last_moved={"ml/spread": 30.0}).migrations != ()


def test_a_move_that_saves_no_node_is_not_made() -> None:
    job = a_job("pair", ["n1", "n2"], low=1, high=2, gpus=8)  # 2 x 8 GPUs need two 8-GPU nodes anyway
    assert plan([job]).migrations == ()


def test_a_job_grows_and_shrinks_with_a_reason() -> None:
    grow = a_job("grow", ["n1", "n1"], low=2, high=6)
    resized = plan([grow], pool=12).resizes
    assert resized == (
        Resize("ml/grow", 2, 6, "resized 2 -> 6 workers: grows into free GPUs (min 2, max 6)"),
    )
    shrink = a_job("shrink", ["n1"] * 4, low=2, high=6)
    assert plan([shrink], pool=4).resizes == (
        Resize("ml/shrink", 4, 2, "resized 4 -> 2 workers: gives GPUs back to waiting work (min 2, max 6)"),
    )


def test_a_job_whose_operator_is_still_creating_workers_is_sized_from_its_declared_replicas() -> None:
    """Two of six declared workers exist: no "resize" to 6, and a shrink is not told as a growth."""
    coming = replace(a_job("coming", ["n1", "n1"], low=2, high=6), replicas=6)
    assert plan([coming], pool=12).resizes == (), "already declared at 6: nothing to do"
    assert plan([coming], pool=8).resizes == (
        Resize("ml/coming", 6, 4, "resized 6 -> 4 workers: gives GPUs back to waiting work (min 2, max 6)"),
    )


spread = st.lists(
    st.lists(st.sampled_from(["n1", "n2", "n3", "n4"]), min_size=1, max_size=6), min_size=1, max_size=3
)


@settings(max_examples=100, deadline=None)
@given(spread, st.integers(1, 3), st.integers(1, 5), st.integers(0, 3))
def test_moves_stay_within_the_limits_and_never_take_a_job_below_its_minimum(
    on: list[list[str]], per_job: int, per_round: int, slack: int
) -> None:
    jobs = [
        a_job(f"j{i}", nodes, low=max(1, len(nodes) - slack), high=len(nodes), gpus=1)
        for i, nodes in enumerate(on)
    ]
    guards = ElasticSettings(moves_per_job=per_job, moves_per_round=per_round, cooldown_seconds=0)
    first = plan(jobs, guards=guards)
    assert first == plan(list(reversed(jobs)), guards=guards), "the same cluster gives the same plan"
    moved = first.migrations
    assert len(moved) <= per_round
    for job in jobs:
        mine = [m for m in moved if m.pod.startswith(job.key + "-")]
        assert len(mine) <= per_job
        assert job.running - len(mine) >= job.min_workers
        assert all(isinstance(m, Migration) and m.source != m.target for m in mine)


def test_workers_bound_to_a_deleted_node_run_nowhere_and_break_nothing() -> None:
    """The node gpu-node-2 was deleted while two workers were bound to it (the API still shows them)."""
    job = a_job("orphaned", ["n1", "n1", "gpu-node-2", "gpu-node-2"], low=2, high=6)
    other = a_job("other", [None, None], low=2, high=4)
    pods = [p for j in (job, other) for p in j.workers]
    result, layout = plan_elastic(
        [job, other],
        snapshot_of(NODES, pods),  # gpu-node-2 is not among them
        pool_gpus=24,
        deficits={"q": 0},
        now=100.0,
        last_moved={},
        settings=ElasticSettings(),
        topologies=TopologyCache(),
    )
    assert "gpu-node-2" not in {n for target in layout.targets.values() for n in target}
    assert all(m.source != "gpu-node-2" for m in result.migrations), "a worker that runs nowhere is not moved"
    assert sum(layout.targets["ml/other"].values()) == 4, "the other job is still sized and laid out"


def test_a_job_grows_by_at_most_the_step_a_round_and_shrinks_at_once() -> None:
    big = a_job("big", ["n1", "n1"], low=2, high=64, gpus=1)
    [grow] = plan([big], pool=32, guards=ElasticSettings(grow_step=8)).resizes
    assert grow == Resize(
        "ml/big",
        2,
        10,
        "resized 2 -> 10 workers: grows into free GPUs, 8 workers a round toward 32 (min 2, max 64)",
    )
    assert plan([big], pool=32, guards=ElasticSettings(grow_step=None)).resizes[0].after == 32
    shrink = replace(big, replicas=40)
    assert plan([shrink], pool=4, guards=ElasticSettings(grow_step=8)).resizes[0].after == 4


def _plan_on_4_gpu_nodes(
    jobs: list[ElasticJob], count: int, models: Mapping[str, Throughput] | None = None
) -> tuple[Plan, Layout]:
    """One round over ``count`` nodes of 4 GPUs, n1 first, the whole cluster the pool."""
    nodes = [a_node(f"n{i}").gpus(4).build() for i in range(1, count + 1)]
    pods = [p for job in jobs for p in job.workers]
    return plan_elastic(
        jobs,
        snapshot_of(nodes, pods),
        pool_gpus=4 * count,
        deficits={"q": 0},
        now=100.0,
        last_moved={},
        settings=ElasticSettings(),
        topologies=TopologyCache(),
        models=models or {},
    )


def _plan_two_on_n1(flat_high: int) -> tuple[Plan, Layout]:
    """Jobs ``flat`` (at most ``flat_high`` workers) and ``lin`` (at most 4) each run one worker on n1."""
    jobs = [a_job("flat", ["n1"], low=1, high=flat_high, gpus=1), a_job("lin", ["n1"], low=1, high=4, gpus=1)]
    return _plan_on_4_gpu_nodes(jobs, 2)


def _held(layout: Layout) -> dict[str, int]:
    held: dict[str, int] = {}
    for target in layout.targets.values():
        for node, workers in target.items():
            held[node] = held.get(node, 0) + workers
    return held


def test_a_job_grows_only_into_room_the_round_leaves_and_says_how_much_waits() -> None:
    """``flat`` cannot grow (max 1) and stays on n1 at its minimum; the layout aims ``lin`` at n1.

    Its new workers go only where its target has room now (never pinned to a full node): its growth
    waits for the rest, and the layout the round reaches fits every node.
    """
    result, layout = _plan_two_on_n1(flat_high=1)
    assert _held(layout) == {"n1": 4}
    [capped] = result.resizes
    assert (capped.job, capped.after) == ("ml/lin", 3)
    assert "room for 2 of 3 more workers now" in capped.reason
    assert layout.unplaced == {"ml/lin": 1}
    assert not result.migrations


def test_a_growing_job_takes_its_only_worker_to_where_it_can_grow() -> None:
    """Both jobs grow; the layout aims ``lin`` at n2.

    A resize restarts every worker of the job, so its one worker moves there in the round it grows,
    below its minimum for the moment of the move, rather than leaving the job spread over two nodes
    for good (or for one more restart later).
    """
    result, layout = _plan_two_on_n1(flat_high=4)
    assert _held(layout) == {"n1": 4, "n2": 4}
    assert sorted((r.job, r.after) for r in result.resizes) == [("ml/flat", 4), ("ml/lin", 4)]
    [move] = result.migrations
    assert (move.pod, move.source, move.target) == ("ml/lin-worker-0", "n1", "n2")
    assert "restarts to resize to 4 workers" in move.reason
    assert not layout.unplaced


def _plan_beside_full_nodes(
    models: Mapping[str, Throughput], grow: ElasticJob | None = None
) -> tuple[Plan, Layout]:
    """``grow`` runs one worker on n1 beside 3 of ``full``; n2 holds 3 of ``half``: one GPU free on each."""
    jobs = [
        grow or a_job("grow", ["n1"], low=1, high=4, gpus=1),
        a_job("full", ["n1"] * 3, low=3, high=3, gpus=1),
        a_job("half", ["n2"] * 3, low=3, high=3, gpus=1),
    ]
    return _plan_on_4_gpu_nodes(jobs, 2, models)


def test_a_job_grows_across_nodes_only_once_its_model_measured_spreading_free() -> None:
    """The only room is one GPU on each node: 2 workers there span two nodes where one would do."""
    unseen, layout = _plan_beside_full_nodes({})
    assert unseen.resizes == () and layout.targets["ml/grow"] == {"n1": 1}, "compact by default"
    assert layout.unplaced == {"ml/grow": 1}
    one_node = [Sample(1, 1, 10.0), Sample(2, 1, 20.0)]
    linear, _ = _plan_beside_full_nodes({"ml/grow": fit(one_node)})
    assert linear.resizes == (), "predicted linear across nodes is no measurement"
    dear, _ = _plan_beside_full_nodes({"ml/grow": fit([*one_node, Sample(2, 2, 12.0)])})
    assert dear.resizes == ()
    cheap, layout = _plan_beside_full_nodes({"ml/grow": fit([*one_node, Sample(2, 2, 19.8)])})
    assert [(r.job, r.after) for r in cheap.resizes] == [("ml/grow", 2)]
    assert layout.targets["ml/grow"] == {"n1": 1, "n2": 1}
    assert "ml/grow" in _plan_beside_full_nodes({})[1].held_compact, "the round says the rule held it"


def test_a_job_the_compact_rule_holds_back_is_told_so_in_its_resize() -> None:
    """Free: 1 GPU on n1 beside its worker, 1 on n2, 2 on n3; the others cannot move or shrink.

    Spread, it would reach 3 on two nodes now; compact, it reaches 2 on n1, and the event says so.
    """
    jobs = [
        a_job("grow", ["n1"], low=1, high=8, gpus=1),
        a_job("x", ["n1"] * 2, low=2, high=2, gpus=1),
        a_job("y", ["n2"] * 3, low=3, high=3, gpus=1),
        a_job("z", ["n3"] * 2, low=2, high=2, gpus=1),
    ]
    result, layout = _plan_on_4_gpu_nodes(jobs, 3)
    [grown] = result.resizes
    assert grown.reason == (
        "resized 1 -> 2 workers: grows into free GPUs, room for 1 of 4 more workers now on the fewest nodes"
        " (more would spread it, and it has not measured spreading free) (min 1, max 8)"
    )
    assert layout.held_compact == {"ml/grow"} and layout.targets["ml/grow"] == {"n1": 2}


def test_a_worker_the_job_was_declared_with_is_no_growth_and_runs_spread_if_it_must() -> None:
    """Declared at 2 workers, one waiting: held compact, it would never run at the size it asked for."""
    declared = a_job("grow", ["n1", None], low=1, high=2, gpus=1)
    result, layout = _plan_beside_full_nodes({}, declared)
    assert result.resizes == ()
    assert layout.targets["ml/grow"] == {"n1": 1, "n2": 1} and not layout.unplaced


def _started(job: ElasticJob, at: float) -> ElasticJob:
    return replace(job, workers=tuple(replace(p, started_at=at) for p in job.workers))


def test_a_growing_job_moves_its_only_worker_however_long_it_ran() -> None:
    """Its first worker was admitted on n1, where 2 of 8 GPUs are left; it grows to 4 on n2.

    Its resize restarts it, so its worker moves with the growth whether it started 5 s ago, long ago,
    or is stamped a minute ahead of the clock: it runs on one node, not two, and the reason is the
    restart it pays anyway, not a node count that did not change.
    """
    other = a_job("other", ["n1"] * 3, low=3, high=3)  # 6 GPUs of n1, never resized
    new = a_job("new", ["n1"], low=1, high=4)
    for started in (95.0, -1000.0, 160.0):
        jobs = [other, _started(new, started)]
        result, layout = _plan_on_two_nodes(jobs, pool_gpus=14)
        assert layout.targets["ml/new"] == {"n2": 4}, started
        assert [m.reason for m in result.migrations] == [
            "moved new-worker-0 from n1 to n2 to its planned node while ml/new restarts to resize to 4 "
            "workers (a move then costs no restart of its own)"
        ], started


def test_a_starting_job_not_resized_moves_below_its_minimum_only_while_it_is_starting() -> None:
    """``new`` keeps its 2 workers, spread over n1 and n2; one node would hold both.

    Started 5 s ago (less than a restart), it has nothing to lose: its n1 worker moves to n2 at once.
    Started long ago, or stamped a minute ahead of the clock (a node whose clock runs fast), it is at
    its minimum and keeps both workers where they are: a job is never moved below its minimum on a guess.
    """
    other = a_job("other", ["n1"] * 3, low=3, high=3)  # 6 GPUs of n1, never resized
    new = a_job("new", ["n1", "n2"], low=2, high=2)
    for started, moved in ((95.0, [("ml/new-worker-0", "n2")]), (-1000.0, []), (160.0, [])):
        result, _ = _plan_on_two_nodes([other, _started(new, started)], pool_gpus=10)
        assert result.resizes == (), started
        assert [(m.pod, m.target) for m in result.migrations] == moved, started


def _plan_on_two_nodes(jobs: list[ElasticJob], pool_gpus: int) -> tuple[Plan, Layout]:
    pods = [p for job in jobs for p in job.workers]
    return plan_elastic(
        jobs,
        snapshot_of(NODES[:2], pods),
        pool_gpus=pool_gpus,
        deficits={"q": 0},
        now=100.0,
        last_moved={},
        settings=ElasticSettings(),
        topologies=TopologyCache(),
    )


def test_a_resized_job_makes_every_move_its_target_needs_in_that_round() -> None:
    """A resize restarts every worker: its moves come with it, past the hysteresis and per-job limit."""
    spread = a_job("spread", ["n1", "n2", "n3", "n4"], low=1, high=4)
    shrunk = plan([spread], pool=6)  # 4 -> 3 workers of 2 GPUs: one node holds them; both moves now
    assert [(r.before, r.after) for r in shrunk.resizes] == [(4, 3)]
    assert len(shrunk.migrations) == 2
    same = plan([spread], pool=8)  # not resized: one move a round (moves_per_job), as before
    assert same.resizes == () and len(same.migrations) == 1
