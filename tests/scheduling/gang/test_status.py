from __future__ import annotations

from dataclasses import replace

import pytest

from scheduling.gang.status import find_shortage, gang_status
from scheduling.model import Pod
from tests.builders import a_gang, a_pod


def on(name: str, phase: str = "Running") -> Pod:
    return a_pod(name).gpus(1).group("g").on("n1", [0]).phase(phase).build()


@pytest.mark.parametrize(
    ("members", "phase"),
    [
        ([a_pod("w0").group("g").build()], "Pending"),
        ([on("w0", "Pending"), on("w1", "Pending")], "Scheduled"),
        ([on("w0"), on("w1")], "Running"),
        ([on("w0"), on("w1", "Succeeded")], "Running"),
        ([on("w0", "Succeeded"), on("w1", "Succeeded")], "Finished"),
        ([on("w0"), on("w1", "Failed")], "Failed"),
    ],
    ids=["unplaced", "bound not started", "running", "winding down", "finished", "a member failed"],
)
def test_gang_phase(members: list[Pod], phase: str) -> None:
    assert gang_status(a_gang("g", 2), members).phase == phase


def test_a_placed_gang_below_min_member_is_short_and_says_why() -> None:
    group = replace(a_gang("g", 3), phase="Running")
    shortage = find_shortage(group, [on("w0"), on("w1"), on("w2", "Failed")])
    assert shortage is not None
    assert [p.name for p in shortage.holding] == ["w0", "w1"]
    assert shortage.message == (
        "gang ml/g: only 2 of 3 members running (1 lost; failed: w2); "
        "evicting the rest so the gang can be placed again whole"
    )


@pytest.mark.parametrize(
    ("phase", "members"),
    [
        ("Pending", [on("w0")]),
        ("Running", [on("w0"), on("w1"), on("w2")]),
        ("Running", [on("w0"), on("w1", "Succeeded")]),
        ("Running", []),
        ("Running", [on("w0"), on("w1"), a_pod("w2").gpus(1).group("g").build()]),
        (
            "Running",
            [
                on("w0"),
                replace(on("w1"), terminating=True),
                a_pod("w1").uid("new").group("g").build(),
                on("w2"),
            ],
        ),
    ],
    ids=[
        "never placed",
        "whole",
        "winding down",
        "nothing left to evict",
        "scaled up: the new member is waiting to be placed",
        "a member being replaced by its operator",
    ],
)
def test_no_shortage(phase: str, members: list[Pod]) -> None:
    """Only lost members make a shortage; members on their way (scale-up, re-created) do not."""
    assert find_shortage(replace(a_gang("g", 3), phase=phase), members) is None


def test_a_member_deleted_and_not_replaced_is_lost() -> None:
    group = replace(a_gang("g", 3), phase="Running")
    shortage = find_shortage(group, [on("w0"), on("w1"), replace(on("w2"), terminating=True)])
    assert shortage is not None
    assert shortage.message.startswith("gang ml/g: only 2 of 3 members running (1 lost)")
