"""When a short gang is stale: the grace period, and the gangs excused because their members are coming back.

``scheduling.gang.status.find_shortage`` says whether a gang is short now; this module says what a
pass does about it. A gang short for the whole grace period is evicted whole. A gang whose members
phalanx itself deleted to be re-created (an elastic MPIJob's workers moved or re-pinned) is not short
yet, whatever its members say: its operator re-creates them under the same names once the old pods
are gone, so the job can have fewer than ``minMember`` members for as long as that takes (all its
workers when a resize moves every one). Counted as lost, a move made on purpose would have the gang
evicted, its launcher too, whenever the re-creation takes longer than the grace period, as on a
loaded control plane. Its shortage clock starts after the window (docs/design/gang-scheduling.md §3).

Times are whatever clock the caller keeps for them, passed in, so a pass can be replayed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from scheduling.gang.status import Shortage, find_shortage
from scheduling.model import Node, Pod, PodGroup


@dataclass(frozen=True, slots=True)
class StaleCheck:
    """One gang's standing after one pass.

    Attributes:
        short_since: when its shortage began, for the caller to keep until the next pass; ``None``
            when it is not short or is excused (its clock starts again after the window).
        evict: the shortage to act on now (it has lasted the grace period), else ``None``.
    """

    short_since: float | None
    evict: Shortage | None


def within(times: Mapping[str, float | None], *, now: float, grace: float) -> frozenset[str]:
    """The keys whose time is within ``grace`` seconds of ``now``, either side.

    A time ahead of the clock by less than ``grace`` (written by a leader on another node whose clock
    runs a little fast) counts; one further ahead (a clock stepped back by hours) does not, or the gang
    could not be evicted as stale until the clock caught up.

    >>> sorted(within({"a": 95.0, "b": 50.0, "c": 104.0, "d": None}, now=100.0, grace=10.0))
    ['a', 'c']
    """
    return frozenset(key for key, at in times.items() if at is not None and abs(now - at) < grace)


def check_stale(
    group: PodGroup,
    members: Sequence[Pod],
    nodes: Mapping[str, Node] | None,
    *,
    short_since: float | None,
    now: float,
    grace: float,
    excused: bool,
) -> StaleCheck:
    """Whether ``group`` is evicted now, and since when it is short.

    Args:
        group: the PodGroup.
        members: its pods.
        nodes: every node, or ``None`` when not known yet (``find_shortage``).
        short_since: when the previous passes first saw it short, or ``None``.
        now: the time, on the clock of ``short_since``.
        grace: how long a shortage may last before the gang is evicted.
        excused: phalanx deleted members of it within the window (``within``) to be re-created.

    >>> from scheduling.model import Resources
    >>> pod = Pod("u0", "ml", "w0", Resources(gpus=1), node_name="n", phase="Running")
    >>> group = PodGroup("ml", "g", 2, phase="Running")
    >>> check_stale(group, [pod], None, short_since=None, now=5.0, grace=3.0, excused=False).short_since
    5.0
    >>> check_stale(group, [pod], None, short_since=1.0, now=5.0, grace=3.0, excused=False).evict is None
    False
    >>> check_stale(group, [pod], None, short_since=1.0, now=5.0, grace=3.0, excused=True)
    StaleCheck(short_since=None, evict=None)
    """
    if excused:
        return StaleCheck(None, None)
    shortage = find_shortage(group, members, nodes)
    if shortage is None:
        return StaleCheck(None, None)
    since = now if short_since is None else short_since
    if now - since < grace:
        return StaleCheck(since, None)
    return StaleCheck(None, shortage)
