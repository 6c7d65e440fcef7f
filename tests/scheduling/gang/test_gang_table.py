"""Gang rows: the phase the placement manager would write, members bound against minMember, the wait."""

from __future__ import annotations

from datetime import datetime

from scheduling.gang.gang_table import gang_rows
from scheduling.gang.status import gang_status
from tests.builders import a_gang, a_node, a_pod, snapshot_of

MADE = "2030-01-01T00:00:00Z"
T0 = datetime.fromisoformat(MADE).timestamp()


def test_running_waiting_empty_and_finished_gangs() -> None:
    pods = [
        *(
            a_pod(f"run-{i}")
            .gpus(4)
            .group("run")
            .queue("a")
            .created(MADE)
            .on("n1", range(4 * i, 4 * i + 4))
            .build()
            for i in range(2)
        ),
        *(a_pod(f"big-{i}").gpus(8).group("big").queue("b").created(MADE).build() for i in range(2)),
        *(
            a_pod(f"done-{i}").group("done").created(MADE).on("n2").phase("Succeeded").build()
            for i in range(2)
        ),
        a_pod("half-0").gpus(1).group("half").created(MADE).on("n2", [0]).build(),
        a_pod("half-1").gpus(1).group("half").created("2030-01-01T00:00:30Z").build(),
    ]
    groups = [
        a_gang("run", 2),
        a_gang("big", 2, timeout=60),
        a_gang("done", 2),
        a_gang("none", 3),
        a_gang("half", 2),
    ]
    groups.append(a_gang("other", 1, namespace="aa"))
    snapshot = snapshot_of([a_node("n1").build(), a_node("n2").build()], pods, groups)
    rows = {r.key: r for r in gang_rows(snapshot, T0 + 90)}
    assert list(rows) == ["aa/other", "ml/big", "ml/done", "ml/half", "ml/none", "ml/run"], "sorted by key"
    run, big = rows["ml/run"], rows["ml/big"]
    assert (run.queue, run.phase, run.bound, run.members, run.min_member, run.waiting_seconds) == (
        "a",
        "Running",
        2,
        2,
        2,
        None,
    )
    assert (big.queue, big.phase, big.bound, big.waiting_seconds, big.past_timeout) == (
        "b",
        "Pending",
        0,
        90.0,
        True,
    )
    assert rows["ml/done"].phase == "Finished" and rows["ml/done"].bound == 0
    assert rows["ml/none"].queue is None and rows["ml/none"].members == 0
    assert rows["ml/half"].queue == "default", "a member without a queue label is in the default queue"
    assert rows["ml/half"].waiting_seconds == 60.0, "the wait starts at the oldest unbound member"
    for row in rows.values():
        group = snapshot.podgroup(row.key)
        assert group is not None
        assert row.phase == gang_status(group, snapshot.members(row.key)).phase
