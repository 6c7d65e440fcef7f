"""The ledger kept per pod change groups the waiting pods exactly as grouping them afresh does.

A random sequence of pod changes (created gated, released with or without a plan, turned down by
kube-scheduler, bound, deleted, relabelled into another gang or queue) and of pods laid over as the
door's arrivals must leave ``PodLedger.look`` equal, after every step, to a plain grouping of the
snapshot's unbound pods, whether the ledger caught up by the change log or by looking at every pod.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from scheduling.cluster.ledger import Flight, PodLedger, Waiting, is_released
from scheduling.cluster.snapshot import ClusterSnapshot, with_pods
from scheduling.cluster.state import ClusterState
from scheduling.model import QUEUE_LABEL, Pod, group_key
from tests.builders import a_node, a_pod

PODS = 8
STEP = st.tuples(
    st.sampled_from(["create", "create", "release", "plan", "refuse", "bind", "delete", "regroup"]),
    st.integers(0, PODS - 1),  # which pod
    st.integers(0, 3),  # which node, gang, GPU count or queue
)


def scan(snapshot: ClusterSnapshot, arrivals: Sequence[Pod] = ()) -> Waiting:
    """The waiting pods grouped from a walk over all of them (what the ledger must equal)."""
    pods = sorted([*snapshot.unbound_queue_pods(), *arrivals], key=lambda p: p.key)
    gated: dict[str, list[Pod]] = {}
    flying: dict[str, list[Pod]] = {}
    planned: dict[str, list[Pod]] = {}
    for pod in pods:
        if is_released(pod):
            flying.setdefault(group_key(pod), []).append(pod)
            if pod.plan is not None:
                planned.setdefault(pod.plan[0], []).append(pod)
        elif pod.gated:
            gated.setdefault(group_key(pod), []).append(pod)
    flights = {key: Flight.of(members) for key, members in flying.items()}
    by_label: dict[str | None, tuple[int, int, int, int]] = {}
    for flight in flights.values():
        if not flight.stamped:
            c, m, g, n = by_label.get(flight.label, (0, 0, 0, 0))
            by_label[flight.label] = (c + flight.sums[0], m + flight.sums[1], g + flight.sums[2], n + 1)
    return Waiting(
        {k: tuple(v) for k, v in gated.items()},
        flights,
        by_label,
        sum(len(f.pods) for f in flights.values()),
        sum(f.sums[2] for f in flights.values()),
        {k: tuple(v) for k, v in planned.items()},
        {p.key: p for f in flights.values() for p in f.pods if p.unschedulable},
        frozenset(k for k, f in flights.items() if f.unplanned),
    )


def _plain(waiting: Waiting) -> tuple[object, ...]:
    """A ``Waiting`` as plain values, to compare."""
    return (
        dict(waiting.gated),
        dict(waiting.released),
        dict(waiting.by_label),
        waiting.members,
        waiting.gpus,
        dict(waiting.planned),
        dict(waiting.unschedulable),
        waiting.unplanned,
    )


def _change(state: ClusterState, what: str, i: int, j: int) -> None:
    snapshot = state.snapshot()
    pod = snapshot.pod("ml", f"p{i}")
    if what == "create" and pod is None:
        built = a_pod(f"p{i}").gpus([1, 1, 2, 4][j]).queue(f"q{j % 2}").gated().build()
        state.put_pod(replace(built, group=None if j < 2 else f"g{j}", labels={**built.labels}))
    elif pod is None:
        return
    elif what == "release":
        state.put_pod(replace(pod, gates=()))
    elif what == "plan":
        state.put_pod(replace(pod, plan=(f"n{j}", tuple(range(pod.requests.gpus)))))
    elif what == "refuse":
        state.put_pod(replace(pod, unschedulable=not pod.unschedulable))
    elif what == "bind":
        state.put_pod(replace(pod, node_name=f"n{j}", gates=()))
    elif what == "delete":
        state.remove_pod(pod.uid)
    else:
        labels = {**pod.labels, QUEUE_LABEL: f"q{j}"}
        state.put_pod(replace(pod, group=None if j == 0 else f"g{j}", labels=labels))


@settings(max_examples=200, deadline=None)
@given(steps=st.lists(st.tuples(st.lists(STEP, max_size=4), st.booleans(), st.integers(0, 2)), max_size=12))
def test_the_ledger_groups_as_a_walk_over_every_pod(
    steps: list[tuple[list[tuple[str, int, int]], bool, int]],
) -> None:
    state = ClusterState()
    state.replace_nodes([a_node(f"n{i}").gpus(8).build() for i in range(4)])
    ledger = PodLedger()
    for changes, relist, arriving in steps:
        for change in changes:
            _change(state, *change)
        if relist:  # a relist: the log no longer covers the span, every pod is looked at
            state.replace_pods(state.snapshot().all_pods())
        snapshot = state.snapshot()
        arrivals = [
            replace(
                a_pod(f"door{n}").gpus(1).queue("q0").build(), uid=f"arriving:ml/door{n}", plan=("n0", (n,))
            )
            for n in range(arriving)
        ]
        looked = with_pods(snapshot, arrivals)
        assert _plain(ledger.look(looked)) == _plain(scan(snapshot, arrivals))
        assert _plain(ledger.look(snapshot)) == _plain(scan(snapshot))  # the arrivals were never kept


def test_a_pod_made_again_under_its_name_stays_turned_down() -> None:
    """The old pod's UID sorts after the new one's, so the log's span removes it after adding the new."""
    state = ClusterState()
    old = replace(a_pod("p").gpus(1).queue("q0").uid("uid-b").build(), unschedulable=True)
    state.put_pod(old)
    ledger = PodLedger()
    assert set(ledger.look(state.snapshot()).unschedulable) == {"ml/p"}
    state.remove_pod("uid-b")
    state.put_pod(replace(old, uid="uid-a"))
    assert [p.uid for p in ledger.look(state.snapshot()).unschedulable.values()] == ["uid-a"]


def test_a_later_look_catches_up_by_the_log() -> None:
    state = ClusterState()
    state.replace_pods([a_pod(f"p{i}").gpus(1).queue("q0").build() for i in range(3)])
    ledger = PodLedger()
    assert set(ledger.look(state.snapshot()).released) == {"ml/p0", "ml/p1", "ml/p2"}
    state.put_pod(a_pod("p9").gpus(2).queue("q0").build())
    later = ledger.look(state.snapshot())
    assert ledger.recounts == 1  # the first look only; the second caught up by the log
    assert (later.gpus, later.members, len(later.released)) == (5, 4, 4)
