"""The groups in flight counted and held from the ledger, as a walk over every unbound pod counts them.

The release pass starts its walk from the groups released and not bound yet: their GPUs out of the
room, their needs on their queues, and (with plans carried on pods) every pod held at its plan. It
reads them from the ledger (``scheduling.cluster.ledger``) and names only the groups that do not count
whole. A random cluster of released and gated pods, gangs and singles, some past the in-flight window,
some promised, some misplaced in no queue, some Kueue's, some let in at the door a moment ago, must
start the walk as the plain rules below do, walking every pod.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from hypothesis import example, given, settings
from hypothesis import strategies as st

from scheduling.admission.flight import ReleasedBook
from scheduling.admission.outcome import GateSettings
from scheduling.admission.release import _begin_walk
from scheduling.cluster.ledger import is_released
from scheduling.cluster.promises import Promise, PromiseBook
from scheduling.cluster.snapshot import ClusterSnapshot, with_pods
from scheduling.cluster.state import ClusterState
from scheduling.cluster.statement import Statement
from scheduling.model import KUEUE_PODSET_LABEL, QUEUE_LABEL, Pod, Resources, group_key
from scheduling.queues import QueueError
from scheduling.queues.view import QueueView, view_of
from scheduling.quota_owner import by_kueue
from scheduling.resources import ZERO, plus
from scheduling.topology import TopologyCache
from tests.builders import a_node, a_pod
from tests.scheduling.queues.builders import gpu_queue

NOW = 10_000.0
TTL = 60.0
SETTINGS = GateSettings(plan_on_pod=True, release_ttl=TTL)

POD = st.tuples(
    st.sampled_from([None, "g1", "g2"]),  # its gang
    st.sampled_from(["q0", "q1", "q1", "nowhere"]),  # its queue label ("nowhere": misplaced)
    st.booleans(),  # released (else gated)
    st.one_of(st.none(), st.tuples(st.integers(0, 3), st.integers(0, 7))),  # its plan
    st.booleans(),  # stamped by Kueue
    st.booleans(),  # promised
    st.sampled_from([None, NOW - 1, NOW - 120]),  # when the book says its group was released
    st.booleans(),  # let in at the door, not seen by the cache yet
)


@dataclass(frozen=True)
class Start:
    """What a walk starts from, as the test compares it."""

    gpus: int
    members: int
    groups: int
    extra: Mapping[str, Resources]
    held: Mapping[str, tuple[str, ...]]
    at: Mapping[str, float]


def plain_start(
    snapshot: ClusterSnapshot, view: QueueView, book: ReleasedBook, promises: PromiseBook
) -> Start:
    """The rules, walking every unbound pod: which groups count, what they need, which pods are held."""
    unbound = snapshot.unbound_queue_pods()
    groups: dict[str, list[Pod]] = {}
    for pod in unbound:
        if is_released(pod):
            groups.setdefault(group_key(pod), []).append(pod)
    at = {key: book.at.get(key, NOW) for key in groups}
    counting = {}
    for key, released_at in at.items():
        kept = [p for p in groups[key] if p.uid not in promises.by_uid]
        if NOW - released_at <= TTL and kept:
            counting[key] = kept
    counted = {k: v for k, v in counting.items() if not any(p.key in view.misplaced for p in v)}
    held = [p for pods in counted.values() for p in pods]
    held += [
        p for k, pods in groups.items() if k not in counting for p in pods if p.key not in view.misplaced
    ]
    extra: dict[str, Resources] = {}
    for pods in counted.values():
        if by_kueue(pods[0], view.kueue):
            continue
        try:
            queue = view.tree.workload_queue(pods[0].labels.get(QUEUE_LABEL))
        except QueueError:
            continue
        for name in view.tree.path(queue):
            for pod in pods:
                extra[name] = plus(extra.get(name, ZERO), pod.requests)
    planned: dict[str, list[str]] = {}
    for pod in sorted(held, key=lambda p: p.key):
        if pod.plan is not None:
            planned.setdefault(pod.plan[0], []).append(pod.key)
    return Start(
        sum(p.requests.gpus for pods in counted.values() for p in pods),
        sum(len(pods) for pods in counted.values()),
        len(counted),
        extra,
        {node: tuple(keys) for node, keys in planned.items()},
        at,
    )


def _cluster(specs: Sequence[tuple[object, ...]]) -> tuple[ClusterSnapshot, ReleasedBook, PromiseBook]:
    state = ClusterState()
    state.replace_nodes([a_node(f"n{i}").gpus(8).build() for i in range(4)])
    state.replace_queues([gpu_queue("q0", quota=16), gpu_queue("q1", quota=16)])
    book: dict[str, float] = {}
    promises = []
    arrivals = []
    for i, (gang, queue, out, plan, stamped, promised, when, door) in enumerate(specs):
        pod = a_pod(f"p{i}").gpus(1).label(QUEUE_LABEL, str(queue)).build()
        labels = {**pod.labels, **({KUEUE_PODSET_LABEL: "main"} if stamped else {})}
        gates = pod.gates if out else (*pod.gates, "phalanx.io/admission")
        where = None if plan is None else (f"n{plan[0]}", (plan[1],))  # type: ignore[index]
        pod = replace(pod, group=gang, labels=labels, gates=gates, plan=where)  # type: ignore[arg-type]
        if door and out:
            arrivals.append(replace(pod, uid=f"arriving:{pod.key}"))
        else:
            state.put_pod(pod)
        if when is not None:
            book[group_key(pod)] = when  # type: ignore[assignment]
        if promised and not door:
            promises.append(Promise(pod.uid, pod.key, "n0", (), NOW + 60, pod.requests))
    snapshot = with_pods(state.snapshot(), arrivals)
    return snapshot, ReleasedBook(book), PromiseBook().add_all(promises)


@settings(max_examples=300, deadline=None)
@given(specs=st.lists(POD, max_size=10))
@example(  # a gang whose misplaced member is promised: the others count
    specs=[
        ("g1", "q0", True, None, False, False, None, False),
        ("g1", "nowhere", True, None, False, True, None, False),
    ]
)
def test_the_walk_starts_from_the_ledger_as_from_every_pod(specs: list[tuple[object, ...]]) -> None:
    snapshot, book, promises = _cluster(specs)
    view = view_of(snapshot, promises)
    work = Statement(snapshot, promises)
    waiting = work.ledger.look(snapshot)
    flight, walk, _ = _begin_walk(work, view, book, TopologyCache(), waiting, now=NOW, settings=SETTINGS)
    held = {node: tuple(p.key for p in hold.pods) for node, hold in work.held._nodes.items()}
    started = Start(walk.flight_gpus, walk.unbound_pods, walk.ahead, walk.extra, held, dict(flight.book.at))
    assert started == plain_start(snapshot, view, book, promises)
