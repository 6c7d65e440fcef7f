"""Which gangs are waiting to be placed, for how long, against their ``scheduleTimeoutSeconds``.

A gang waits while it has members not yet bound and fewer than ``minMember`` bound: its wait starts when
its oldest unbound member was created. Elastic workers beyond ``minMember`` of a running gang are not a
gang waiting (the placement manager counts them apart). Sizes are grouped in powers of two so that a
metric labelled by size keeps a handful of series.
"""

from __future__ import annotations

from dataclasses import dataclass

from scheduling.cluster.snapshot import ClusterSnapshot
from scheduling.model import TERMINAL_PHASES, Pod
from scheduling.timestamps import seconds


@dataclass(frozen=True, slots=True)
class GangWait:
    """One waiting gang.

    Attributes:
        key: the PodGroup's ``namespace/name``.
        size: its ``minMember``.
        waited: seconds since its oldest unbound member was created.
        timeout: its ``scheduleTimeoutSeconds``.
    """

    key: str
    size: int
    waited: float
    timeout: int

    @property
    def past_timeout(self) -> bool:
        """It has waited longer than its ``scheduleTimeoutSeconds``."""
        return self.waited > self.timeout


def waiting_gangs(snapshot: ClusterSnapshot, now: float) -> list[GangWait]:
    """The gangs waiting at ``now`` (seconds since the epoch), sorted by key.

    >>> from scheduling.model import PodGroup, Pod, Resources
    >>> from scheduling.cluster.state import state_of
    >>> made = "2030-01-01T00:00:00Z"
    >>> pods = [Pod(f"u{i}", "ml", f"w{i}", Resources(gpus=8), created=made, group="g") for i in range(2)]
    >>> snapshot = state_of([], pods, [PodGroup("ml", "g", 2, 60)]).snapshot()
    >>> waiting_gangs(snapshot, seconds(made) + 90)
    [GangWait(key='ml/g', size=2, waited=90.0, timeout=60)]
    """
    waits: list[GangWait] = []
    for group in snapshot.podgroups():
        members = snapshot.members(group.key)
        bound = sum(1 for m in members if m.node_name is not None and m.phase not in TERMINAL_PHASES)
        unbound = [m for m in members if _unbound(m)]
        if not unbound or bound >= group.min_member:
            continue
        times = [t for t in (seconds(m.created) for m in unbound) if t is not None]
        waited = max(0.0, now - min(times)) if times else 0.0
        waits.append(GangWait(group.key, group.min_member, waited, group.timeout_seconds))
    return waits


def size_class(size: int) -> str:
    """The power-of-two class of a gang size: 1, 2, 3-4, 5-8, ... 33-64, then 65+.

    >>> [size_class(n) for n in (1, 2, 3, 4, 5, 8, 9, 64, 65, 512)]
    ['1', '2', '3-4', '3-4', '5-8', '5-8', '9-16', '33-64', '65+', '65+']
    """
    if size <= 2:
        return str(max(size, 1))
    upper = 1 << (size - 1).bit_length()
    return "65+" if upper > 64 else f"{upper // 2 + 1}-{upper}"


def _unbound(pod: Pod) -> bool:
    return pod.node_name is None and pod.phase == "Pending" and not pod.terminating
