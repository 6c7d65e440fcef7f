"""The kept state holds, after every sync, exactly what a state built from the same jobs' pods holds."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from scheduling.cluster.snapshot import ClusterSnapshot
from scheduling.cluster.state import state_of
from scheduling.queues import Queue, ResourceQuota
from simulator.policies.synced_state import JobEntry, SyncedState
from simulator.simulated_cluster import Worker, job_group, job_pods, make_nodes
from tests.builders import snapshot_content

NODES = make_nodes(3, 4)
QUEUES = (Queue("qa", gpu=ResourceQuota(quota=4)), Queue("qb", gpu=ResourceQuota(quota=8)))
JOBS = ("a", "b", "c", "d")


@st.composite
def workers(draw: st.DrawFn) -> Worker:
    node = draw(st.sampled_from((None, *(n.name for n in NODES))))
    gpus = draw(st.integers(1, 4))
    if node is None:
        return Worker(gpus)
    indices = tuple(sorted(draw(st.sets(st.integers(0, 3), min_size=gpus, max_size=gpus))))
    return Worker(gpus, node, indices, draw(st.integers(0, 600)))


entries = st.builds(
    JobEntry,
    st.lists(workers(), min_size=1, max_size=3).map(tuple),
    st.sampled_from(("default", "qa", "qb")),
    st.integers(0, 300),
    st.integers(1, 3),
)
steps = st.lists(
    st.tuples(
        st.dictionaries(st.sampled_from(JOBS), entries, max_size=len(JOBS)),
        st.frozensets(st.sampled_from((*JOBS, "gone"))),
    ),
    min_size=1,
    max_size=8,
)


def rebuilt(jobs: dict[str, JobEntry], *, ungated: frozenset[str] = frozenset()) -> ClusterSnapshot:
    """What the policy built before the state was kept: every pod, every group, from scratch."""
    pods = [
        pod
        for name in sorted(jobs)
        for pod in job_pods(name, jobs[name].workers, queue=jobs[name].queue, submitted=jobs[name].submitted)
    ]
    pods = [replace(p, gates=()) if p.gated and p.group in ungated else p for p in pods]
    groups = [job_group(name, jobs[name].min_workers) for name in sorted(jobs)]
    return state_of(NODES, pods, groups, QUEUES).snapshot()


@settings(max_examples=300, deadline=None)
@given(steps)
def test_every_sync_and_every_opening_of_the_gates_gives_the_state_rebuilt_from_the_same_jobs(
    history: list[tuple[dict[str, JobEntry], frozenset[str]]],
) -> None:
    synced = SyncedState(NODES, QUEUES)
    for jobs, opened in history:
        assert snapshot_content(synced.sync(jobs)) == snapshot_content(rebuilt(jobs))
        if opened:
            assert snapshot_content(synced.ungate(opened)) == snapshot_content(rebuilt(jobs, ungated=opened))


def test_a_sync_with_nothing_changed_leaves_the_snapshot_as_it_was() -> None:
    jobs = {"a": JobEntry((Worker(2, NODES[0].name, (0, 1)), Worker(2)), "qa", 0, 2)}
    synced = SyncedState(NODES, QUEUES)
    first = synced.sync(jobs)
    assert synced.sync(dict(jobs)) is first
    assert synced.ungate(["a"]) is not first
    assert snapshot_content(synced.sync(jobs)) == snapshot_content(first)
