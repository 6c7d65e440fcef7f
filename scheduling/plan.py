"""What a planner decided, as data: the actions a driver applies, each with the reason it gives.

A ``Statement`` (``scheduling.cluster.statement``) records actions as a planner tries them on a working copy
of a snapshot and hands them out as one ``Plan`` when the planner commits. The driver applies the plan
(binds, deletes, patches) and writes each action's reason into an event; the simulator applies the
same plan to its own state.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Assignment:
    """Put a pending pod on a node with these GPU indices."""

    pod: str
    uid: str
    node: str
    gpus: tuple[int, ...]
    reason: str = ""


@dataclass(frozen=True, slots=True)
class Eviction:
    """Take a running pod off its node.

    ``group`` names the gang the pod leaves with when the whole gang goes (reclaim evicts gangs whole);
    empty for a pod taken alone.
    """

    pod: str
    uid: str
    node: str
    reason: str = ""
    group: str = ""


@dataclass(frozen=True, slots=True)
class Migration:
    """Move a running pod to another node (evict it; its controller re-creates it, pinned there)."""

    pod: str
    uid: str
    source: str
    target: str
    gpus: tuple[int, ...]
    reason: str = ""


@dataclass(frozen=True, slots=True)
class Resize:
    """Change how many workers an elastic job runs."""

    job: str
    before: int
    after: int
    reason: str = ""


Action = Assignment | Eviction | Migration | Resize


@dataclass(frozen=True, slots=True)
class Plan:
    """Actions in the order they were decided."""

    actions: tuple[Action, ...] = ()

    @property
    def assignments(self) -> tuple[Assignment, ...]:
        """The assignments, in order."""
        return tuple(a for a in self.actions if isinstance(a, Assignment))

    @property
    def evictions(self) -> tuple[Eviction, ...]:
        """The evictions, in order."""
        return tuple(a for a in self.actions if isinstance(a, Eviction))

    @property
    def migrations(self) -> tuple[Migration, ...]:
        """The migrations, in order."""
        return tuple(a for a in self.actions if isinstance(a, Migration))

    @property
    def resizes(self) -> tuple[Resize, ...]:
        """The resizes, in order."""
        return tuple(a for a in self.actions if isinstance(a, Resize))
