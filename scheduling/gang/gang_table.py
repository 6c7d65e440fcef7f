"""Every gang's state in one row: its queue, phase, members bound against ``minMember``, and its wait.

The phase is the one the placement manager writes on the PodGroup (``scheduling.gang.status.gang_status``)
computed from the members now, so it does not lag a status write; the wait is the placement manager's
metric (``scheduling.gang.wait``). Why a gang waits is not in the cluster state but on its Events, which
the caller attaches.
"""

from __future__ import annotations

from dataclasses import dataclass

from scheduling.cluster.snapshot import ClusterSnapshot
from scheduling.gang.status import gang_status
from scheduling.gang.wait import waiting_gangs
from scheduling.model import DEFAULT_QUEUE, QUEUE_LABEL


@dataclass(frozen=True, slots=True)
class GangRow:
    """One PodGroup.

    Attributes:
        namespace: the PodGroup's namespace.
        name: its name.
        queue: the queue its members name (``phalanx.io/queue``, else the default queue); ``None`` while
            it has no member pods.
        phase: ``Pending``, ``Scheduled``, ``Running``, ``Finished`` or ``Failed``, from its members.
        members: pods labelled into it (finished ones too).
        bound: members holding a node now (bound and not finished).
        min_member: its ``minMember``.
        waiting_seconds: how long it has waited to be placed (since its oldest unbound member was
            created); ``None`` when it is not waiting.
        timeout_seconds: its ``scheduleTimeoutSeconds``.
    """

    namespace: str
    name: str
    queue: str | None
    phase: str
    members: int
    bound: int
    min_member: int
    waiting_seconds: float | None
    timeout_seconds: int

    @property
    def key(self) -> str:
        """``namespace/name``."""
        return f"{self.namespace}/{self.name}"

    @property
    def past_timeout(self) -> bool:
        """It has waited longer than its ``scheduleTimeoutSeconds``."""
        return self.waiting_seconds is not None and self.waiting_seconds > self.timeout_seconds


def gang_rows(snapshot: ClusterSnapshot, now: float) -> tuple[GangRow, ...]:
    """Every PodGroup of ``snapshot`` at ``now`` (seconds since the epoch), sorted by ``namespace/name``.

    >>> from scheduling.model import Pod, PodGroup, Resources
    >>> from scheduling.cluster.state import state_of
    >>> pods = [Pod(f"u{i}", "ml", f"w{i}", Resources(gpus=8), group="g", created="2030-01-01T00:00:00Z",
    ...             labels={"phalanx.io/queue": "a"}) for i in range(2)]
    >>> [row] = gang_rows(state_of([], pods, [PodGroup("ml", "g", 2)]).snapshot(), 1893456030.0)
    >>> row.queue, row.phase, row.bound, row.min_member, row.waiting_seconds
    ('a', 'Pending', 0, 2, 30.0)
    """
    waits = {w.key: w.waited for w in waiting_gangs(snapshot, now)}
    rows: list[GangRow] = []
    for group in snapshot.podgroups():
        members = snapshot.members(group.key)
        queue = (members[0].labels.get(QUEUE_LABEL) or DEFAULT_QUEUE) if members else None
        rows.append(
            GangRow(
                namespace=group.namespace,
                name=group.name,
                queue=queue,
                phase=gang_status(group, members).phase,
                members=len(members),
                bound=sum(1 for m in members if m.holds_resources),
                min_member=group.min_member,
                waiting_seconds=waits.get(group.key),
                timeout_seconds=group.timeout_seconds,
            )
        )
    return tuple(rows)
