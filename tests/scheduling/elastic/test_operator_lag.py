"""``write_turn``: phalanx writes an elastic MPIJob once its operator's status has caught up with its pods."""

from __future__ import annotations

import pytest

from scheduling.elastic.operator_lag import LAG_WAIT, OperatorCount, WriteTurn, write_turn


@pytest.mark.parametrize(
    ("count", "since", "now", "turn"),
    [
        (None, None, 100.0, WriteTurn(write=True, lagging_since=None)),
        (OperatorCount(None, 3), None, 100.0, WriteTurn(write=True, lagging_since=None)),
        (OperatorCount(4, 4), 90.0, 100.0, WriteTurn(write=True, lagging_since=None)),
        (
            OperatorCount(4, 6),
            None,
            100.0,
            WriteTurn(
                False,
                100.0,
                "its operator counts 4 running worker(s) where 6 run; written once it has caught up",
            ),
        ),
        (
            OperatorCount(6, 4),
            95.0,
            100.0,
            WriteTurn(
                False,
                95.0,
                "its operator counts 6 running worker(s) where 4 run; written once it has caught up",
            ),
        ),
        (
            OperatorCount(6, 4),
            100.0 - LAG_WAIT,
            100.0,
            WriteTurn(
                True, 90.0, "its operator counts 6 running worker(s) where 4 run for 10s; written anyway"
            ),
        ),
    ],
    ids=["unknown", "no-status-yet", "caught-up", "lag-seen", "lag-kept", "lag-too-long"],
)
def test_write_turn(count: OperatorCount | None, since: float | None, now: float, turn: WriteTurn) -> None:
    assert write_turn(count, since, now) == turn
