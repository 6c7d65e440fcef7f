"""Who leads: the Lease decision, on the candidate's own clock."""

from __future__ import annotations

import pytest

from scheduling.leadership import LeaseRecord, Sighting, Step, next_step, observe

HELD_BY_A = LeaseRecord("a", 15, 3, "10")


@pytest.mark.parametrize(
    ("me", "sighting", "now", "step"),
    [
        pytest.param("b", Sighting(None, 0.0), 0.0, Step.CREATE, id="no-lease"),
        pytest.param("a", Sighting(HELD_BY_A, 0.0), 100.0, Step.RENEW, id="mine-renew-even-late"),
        pytest.param("b", Sighting(HELD_BY_A, 100.0), 114.9, Step.WAIT, id="held-and-fresh"),
        pytest.param("b", Sighting(HELD_BY_A, 100.0), 115.0, Step.TAKE, id="unchanged-a-whole-duration"),
        pytest.param("b", Sighting(LeaseRecord("", 15, 3, "11"), 100.0), 100.0, Step.TAKE, id="released"),
    ],
)
def test_next_step(me: str, sighting: Sighting, now: float, step: Step) -> None:
    assert next_step(me, sighting, now)[0] is step


def test_a_renewal_seen_restarts_the_wait_and_an_unchanged_record_does_not() -> None:
    first = observe(None, HELD_BY_A, 100.0)
    same = observe(first, HELD_BY_A, 110.0)
    assert same.since == 100.0, "the same version: the wait goes on"
    renewed = observe(same, LeaseRecord("a", 15, 3, "11"), 112.0)
    assert renewed.since == 112.0, "a new version (renewed): wait a whole duration again"
    assert next_step("b", renewed, 120.0)[0] is Step.WAIT
    step, why = next_step("b", renewed, 127.0)
    assert step is Step.TAKE
    assert why == "a has not renewed the Lease for 15.0s"
