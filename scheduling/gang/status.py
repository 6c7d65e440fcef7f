"""A gang's status from its members, and the rule for evicting a gang that fell below ``minMember``.

A gang that once ran with all its members but lost some (a member failed, was evicted or deleted) is
worse than no gang: the survivors hold GPUs and wait forever for peers that will not come back
(docs/design/anchors.md §4). Such a gang is evicted whole after a grace period, so its controller can recreate
it and the scheduler can place it again all at once. A gang winding down (a member succeeded) is not
stale: training jobs finish member by member.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from scheduling.model import Node, Pod, PodGroup
from scheduling.nodes.readiness import member_loss

PLACED_PHASES = frozenset({"Scheduled", "Running"})
"""Phases that say the gang once had ``minMember`` members placed."""


@dataclass(frozen=True, slots=True)
class GangStatus:
    """The PodGroup status fields phalanx maintains (scheduler-plugins names)."""

    phase: str
    scheduled: int
    running: int
    succeeded: int
    failed: int


def gang_status(group: PodGroup, members: Sequence[Pod]) -> GangStatus:
    """Count the members and name the phase.

    >>> from scheduling.model import Resources
    >>> pods = [Pod(f"u{i}", "ml", f"w{i}", Resources(), node_name="n", phase="Running") for i in range(2)]
    >>> gang_status(PodGroup("ml", "g", 2), pods).phase
    'Running'
    """
    scheduled = sum(1 for m in members if m.node_name is not None)
    running = sum(1 for m in members if m.phase == "Running" and m.node_name is not None)
    succeeded = sum(1 for m in members if m.phase == "Succeeded")
    failed = sum(1 for m in members if m.phase == "Failed")
    need = group.min_member
    if succeeded >= need:
        phase = "Finished"
    elif running >= need or (running and running + succeeded >= need):
        phase = "Running"
    elif failed and scheduled - failed - succeeded < need:
        phase = "Failed"
    elif scheduled >= need:
        phase = "Scheduled"
    elif group.phase in PLACED_PHASES and any(m.holds_resources for m in members):
        phase = group.phase  # placed once and now short: stays placed until evicted (find_shortage)
    else:
        phase = "Pending"
    return GangStatus(phase, scheduled, running, succeeded, failed)


@dataclass(frozen=True, slots=True)
class Shortage:
    """A placed gang now running with fewer than ``minMember`` members."""

    group: PodGroup
    holding: tuple[Pod, ...]
    message: str


def find_shortage(
    group: PodGroup, members: Sequence[Pod], nodes: Mapping[str, Node] | None = None
) -> Shortage | None:
    """The shortage of ``group``, if it was placed and has lost members it cannot run without.

    A member is lost when it failed, or is gone or going and nothing replaced it, or its node is not
    Ready or was deleted (``scheduling.nodes.readiness.member_loss``; ``nodes`` ``None``: nodes not known
    yet, no member is lost that way). The API still shows a member on a dead node Running, but its
    peers wait on it in vain. A member still waiting to be placed is not lost: an elastic job scaled up
    (``minMember`` follows the replicas) or a worker its operator re-created is on its way, and the
    gang keeps running meanwhile (evicting a job because it grew would kill a job that was only scaling up).

    The shortage holds every live member, those on dead nodes too: the gang is evicted whole.
    """
    if group.phase not in PLACED_PHASES and group.phase != "Failed":
        return None
    if any(m.phase == "Succeeded" for m in members):
        return None
    holding = tuple(
        sorted((m for m in members if m.holds_resources and not m.terminating), key=lambda m: m.name)
    )
    dead = {m.name: why for m in holding if (why := member_loss(m.node_name, nodes)) is not None}
    running = len(holding) - len(dead)
    waiting = sum(1 for m in members if m.node_name is None and not m.terminating and m.phase == "Pending")
    if not holding or running + waiting >= group.min_member:
        return None
    lost = group.min_member - running - waiting
    on_dead = "; ".join(f"{m.name} on node {m.node_name}, {dead[m.name]}" for m in holding if m.name in dead)
    failed = sorted(m.name for m in members if m.phase == "Failed")
    why = (f": {on_dead}" if on_dead else "") + (f"; failed: {', '.join(failed)}" if failed else "")
    message = (
        f"gang {group.key}: only {running} of {group.min_member} members running "
        f"({lost} lost{why}); evicting the rest so the gang can be placed again whole"
    )
    return Shortage(group, holding, message)
