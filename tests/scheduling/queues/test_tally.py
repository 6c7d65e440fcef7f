"""A tally's view equals the view walked from every pod, snapshot after snapshot.

``QueueTally`` recounts only the pods whose object or promise changed since its last view, and sums
the capacity again only over the nodes changed; a random sequence of changes (pods added, changed,
finished and deleted, Queues changed, gangs stamped by Kueue, promises made and released, nodes added,
resized, cordoned, removed and listed again, pods listed again) must leave every view it gives equal
to ``view_of`` on the same snapshot and promises.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduling.cluster.promises import Promise, PromiseBook
from scheduling.cluster.state import ClusterState
from scheduling.model import KUEUE_PODSET_LABEL, Pod
from scheduling.queues.tally import QueueTally
from scheduling.queues.view import QueueView, view_of
from tests.builders import a_node
from tests.scheduling.queues.test_view_fast import POD, QUEUE_SETS, PodSpec, _pods

NODE_CHANGE = st.tuples(
    st.sampled_from(["put", "cordon", "not-ready", "remove", "relist", "relist-pods"]),
    st.integers(0, 4),  # which node
    st.integers(1, 8),  # its GPUs
)

CHANGE = st.tuples(
    st.sampled_from(["keep", "keep", "put", "remove"]),
    POD,
    st.integers(0, 7).map(lambda i: i == 0),  # stamped by Kueue
)


def _views(
    state: ClusterState, tally: QueueTally, promises: PromiseBook
) -> tuple[QueueView | str, QueueView | str]:
    snapshot = state.snapshot()
    try:
        walked: QueueView | str = view_of(snapshot, promises)
    except ValueError as exc:
        with pytest.raises(ValueError, match=re.escape(str(exc))):
            tally.view(snapshot, promises)
        return str(exc), str(exc)
    return walked, tally.view(snapshot, promises)


def _promises(state: ClusterState, picks: set[int]) -> PromiseBook:
    """Promises for the pods at ``picks`` (indices into the snapshot's pods by uid, wrapped around)."""
    pods = sorted(state.snapshot().all_pods(), key=lambda p: p.uid)
    chosen = {pods[i % len(pods)] for i in picks} if pods else set()
    return PromiseBook.of({p.uid: Promise(p.uid, p.key, "n0", (), 1e9, p.requests) for p in chosen})


@settings(max_examples=150, deadline=None)
@given(
    first=st.sampled_from(sorted(QUEUE_SETS)),
    steps=st.lists(
        st.tuples(
            st.sampled_from([None, None, None, None, *sorted(QUEUE_SETS)]),  # most steps keep the Queues
            st.lists(CHANGE, min_size=1, max_size=25),
            st.sets(st.integers(0, 60), max_size=6),  # the pods a promise holds after the step
            st.lists(NODE_CHANGE, max_size=2),
        ),
        min_size=1,
        max_size=10,
    ),
)
def test_a_tally_gives_the_walked_view_after_every_change(
    first: str,
    steps: list[tuple[str | None, list[tuple[str, PodSpec, bool]], set[int], list[tuple[str, int, int]]]],
) -> None:
    state = ClusterState()
    for i in range(3):
        state.put_node(a_node(f"n{i}").build())
    state.replace_queues(QUEUE_SETS[first])
    tally = QueueTally()
    for queues, changes, picks, nodes in steps:
        if queues is not None:
            state.replace_queues(QUEUE_SETS[queues])
        for what, i, gpus in nodes:
            _change_node(state, what, f"n{i}", gpus)
        built, _ = _pods([spec for _, spec, _ in changes])
        for (what, _, stamped), pod in zip(changes, built, strict=True):
            if stamped:
                pod = replace(pod, labels={**pod.labels, KUEUE_PODSET_LABEL: "main"})
            if what == "put":
                state.put_pod(pod)
            elif what == "remove":
                state.remove_pod(pod.uid)
        walked, tallied = _views(state, tally, _promises(state, picks))
        assert tallied == walked
        if isinstance(walked, QueueView):
            assert isinstance(tallied, QueueView)
            assert tallied.pending == walked.pending  # in order
            assert dict(tallied.positions) == dict(walked.positions)
            assert dict(tallied.misplaced) == dict(walked.misplaced)
            assert tallied.kueue == walked.kueue
            assert _plain(tallied.running_pods) == _plain(walked.running_pods)


def _change_node(state: ClusterState, what: str, name: str, gpus: int) -> None:
    """One change of ``NODE_CHANGE``: a node's (the capacity the views divide follows it), or a pod list."""
    node = a_node(name).gpus(gpus)
    if what == "put":
        state.put_node(node.build())
    elif what == "cordon":
        state.put_node(node.cordoned().build())
    elif what == "not-ready":
        state.put_node(node.not_ready().build())
    elif what == "remove":
        state.remove_node(name)
    elif what == "relist-pods":  # a list of the pods, one of them gone meanwhile
        pods = sorted(state.snapshot().all_pods(), key=lambda p: p.uid)
        state.replace_pods(pods[:gpus] + pods[gpus + 1 :])
    else:
        kept = [n for n in state.snapshot().nodes.values() if n.name != name]
        state.replace_nodes([*kept, node.build()])


def test_a_tally_recounts_only_when_queues_change() -> None:
    state = ClusterState()
    state.put_node(a_node("n0").build())
    state.replace_queues(QUEUE_SETS[sorted(QUEUE_SETS)[0]])
    tally = QueueTally()
    specs = [PodSpec("q0", 1, 0, None, "Pending", False, False, 0, None, None, 0, False, 0)] * 3
    pods, _ = _pods(specs)
    for pod in pods:
        state.put_pod(pod)
    tally.view(state.snapshot())
    state.remove_pod(pods[0].uid)
    tally.view(state.snapshot())
    assert tally.recounts == 1, "a pod's change is counted on its own"
    state.replace_queues(QUEUE_SETS[sorted(QUEUE_SETS)[1]])
    tally.view(state.snapshot())
    assert tally.recounts == 2, "a Queue's change recounts every pod"


def _plain(running: Mapping[str, Mapping[str, Pod]]) -> dict[str, dict[str, Pod]]:
    return {queue: dict(pods) for queue, pods in running.items()}
