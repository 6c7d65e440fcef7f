from __future__ import annotations

import pytest

from scheduling.elastic.growth import Need, place_needs


def a_need(key: str, workers: int, aim: dict[str, int], present: dict[str, int] | None = None) -> Need:
    return Need(key, workers, 1, aim, present or {})


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
