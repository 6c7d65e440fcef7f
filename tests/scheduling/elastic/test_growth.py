from __future__ import annotations

from dataclasses import replace

import pytest

from scheduling.elastic.growth import Need, place_needs


def a_need(key: str, workers: int, aim: dict[str, int], present: dict[str, int] | None = None) -> Need:
    return Need(key, workers, 1, aim, present or {})


def compact(need: Need) -> Need:
    """``need`` for a job whose model does not say spreading is free for it."""
    return replace(need, may_spread=False)


@pytest.mark.parametrize(
    ("needs", "room", "placed"),
    [
        pytest.param(
            [a_need("ml/a", 3, {"n1": 4}, {"n1": 1})],
            {"n1": 3, "n2": 4},
            {"ml/a": {"n1": 3}},
            id="all-where-the-target-has-room",
        ),
        pytest.param(
            [a_need("ml/a", 3, {"n1": 4}, {"n1": 1})],
            {"n1": 2, "n2": 4},
            {"ml/a": {"n1": 2}},
            id="never-off-the-target-even-beside-free-room",
        ),
        pytest.param(
            [a_need("ml/small", 1, {"n1": 1}), a_need("ml/big", 3, {"n1": 3})],
            {"n1": 3},
            {"ml/big": {"n1": 3}, "ml/small": {}},
            id="the-job-needing-most-takes-contested-room-first",
        ),
        pytest.param(
            [a_need("ml/a", 4, {"n1": 2, "n2": 2})],
            {"n1": 1, "n2": 2},
            {"ml/a": {"n1": 1, "n2": 2}},
            id="each-target-node-up-to-its-room",
        ),
    ],
)
def test_workers_go_only_to_their_target_nodes_as_far_as_the_room_goes(
    needs: list[Need], room: dict[str, int], placed: dict[str, dict[str, int]]
) -> None:
    assert place_needs(needs, room) == placed


def test_with_moves_off_what_the_target_cannot_hold_goes_where_room_is() -> None:
    """No move would ever reach the target: the job's own nodes first, then the node it fills best."""
    need = a_need("ml/a", 5, {"n1": 6}, {"n2": 1})
    room = {"n1": 2, "n2": 1, "n3": 4, "n4": 2}
    assert place_needs([need], room) == {"ml/a": {"n1": 2}}
    assert place_needs([need], room, anywhere=True) == {"ml/a": {"n1": 2, "n2": 1, "n4": 2}}


@pytest.mark.parametrize(
    ("need", "room", "placed"),
    [
        pytest.param(
            a_need("ml/a", 5, {"n1": 1, "n2": 2}, {"n1": 1}),
            {"n1": 0, "n2": 2},
            {"ml/a": {}},
            id="its-node-full-it-does-not-grow-to-3-on-2-nodes",
        ),
        pytest.param(
            a_need("ml/a", 5, {"n1": 2, "n2": 4}, {"n1": 1}),
            {"n1": 1, "n2": 4},
            {"ml/a": {"n1": 1, "n2": 4}},
            id="a-second-node-once-the-size-reached-needs-it",
        ),
        pytest.param(
            a_need("ml/a", 2, {"n1": 2, "n2": 1}, {"n1": 1}),
            {"n1": 1, "n2": 1, "n3": 4},
            {"ml/a": {"n1": 1}},
            id="on-its-own-node-first-never-a-second-for-a-size-one-node-holds",
        ),
        pytest.param(
            a_need("ml/a", 2, {"n1": 3, "n2": 1}, {"n1": 2, "n2": 1}),
            {"n1": 1, "n2": 1, "n3": 4},
            {"ml/a": {"n1": 1}},
            id="spread-already-it-grows-on-its-own-nodes",
        ),
        pytest.param(
            a_need("ml/a", 3, {"n1": 2, "n2": 1}),
            {"n1": 2, "n2": 1, "n3": 3},
            {"ml/a": {"n3": 3}},
            id="off-its-target-onto-one-node-with-the-room-rather-than-spread",
        ),
    ],
)
def test_a_job_whose_model_does_not_say_spreading_is_free_grows_only_as_far_as_it_stays_compact(
    need: Need, room: dict[str, int], placed: dict[str, dict[str, int]]
) -> None:
    assert place_needs([compact(need)], room, node_gpus=4) == placed
    free = place_needs([need], room, node_gpus=4)
    assert sum(free["ml/a"].values()) >= sum(placed["ml/a"].values()), "spreading free: it may take more"


def test_the_compact_rule_needs_the_node_size_and_stays_off_where_moves_are_off() -> None:
    need = compact(a_need("ml/a", 5, {"n1": 1, "n2": 2}, {"n1": 1}))
    room = {"n1": 0, "n2": 2}
    assert place_needs([need], room) == {"ml/a": {"n2": 2}}, "node size not known: no job is held"
    assert place_needs([need], room, anywhere=True, node_gpus=4) == {"ml/a": {"n2": 2}}
