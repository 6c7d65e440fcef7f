from __future__ import annotations

from datetime import datetime

import pytest

from scheduling.gang.wait import GangWait, size_class, waiting_gangs
from tests.builders import a_gang, a_pod, snapshot_of

T0 = "2030-01-01T00:00:00Z"
START = datetime.fromisoformat(T0).timestamp()


def test_a_gang_waits_from_its_oldest_unbound_member() -> None:
    late = "2030-01-01T00:00:30Z"
    pods = [
        a_pod("w0").gpus(8).group("g").created(late).build(),
        a_pod("w1").gpus(8).group("g").created(T0).build(),
    ]
    [wait] = waiting_gangs(snapshot_of([], pods, [a_gang("g", 2, timeout=60)]), START + 100)
    assert wait == GangWait("ml/g", 2, 100.0, 60)
    assert wait.past_timeout


def test_a_gang_bound_up_to_min_member_does_not_wait_even_with_elastic_extras() -> None:
    pods = [
        a_pod(f"w{i}").gpus(1).group("g").created(T0).on("n0", [i]).phase("Running").build() for i in (0, 1)
    ]
    extra = a_pod("w2").gpus(1).group("g").created(T0).build()
    assert waiting_gangs(snapshot_of([], [*pods, extra], [a_gang("g", 2)]), START + 1000) == []


def test_finished_terminating_and_memberless_gangs_do_not_wait() -> None:
    done = a_pod("d").group("done").created(T0).phase("Succeeded").build()
    going = a_pod("t").group("going").created(T0).terminating().build()
    groups = [a_gang("done", 1), a_gang("going", 1), a_gang("empty", 1)]
    assert waiting_gangs(snapshot_of([], [done, going], groups), START + 1000) == []


def test_an_unreadable_creation_time_waits_zero_seconds_rather_than_failing() -> None:
    pod = a_pod("w0").group("g").created("not a time").build()
    [wait] = waiting_gangs(snapshot_of([], [pod], [a_gang("g", 1)]), START)
    assert wait.waited == 0.0
    assert not wait.past_timeout


@pytest.mark.parametrize(
    ("size", "label"), [(0, "1"), (1, "1"), (2, "2"), (3, "3-4"), (16, "9-16"), (17, "17-32"), (100, "65+")]
)
def test_size_classes_are_powers_of_two(size: int, label: str) -> None:
    assert size_class(size) == label
