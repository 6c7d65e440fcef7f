"""Choosing just enough victims: the smallest set of whole gangs whose eviction covers a shortfall.

Reclaim (``scheduling.queues.reclaim``) decides *whether* a group may take room back and from whom; this
module decides *which* gangs, so that no more is evicted than needed (volcano #5984 evicted 10 pods to
free 1; KAI PR #1565 evicted 376 GPUs for a 48-GPU request). The search, deterministic throughout:

1. Among the gangs that may still be taken (their queue stays at or above its fair share; or, when the
   beneficiary is owed its quota, at or above its deserved quota, preferring gangs whose queue still
   keeps its fair share and, when none does, those whose queue ends least below its fair share: the
   room comes from the queue furthest over its share, whatever the gangs' ages), look at the
   lowest priority present; inside it, in the caller's order (youngest first), take an exact fit for
   what is still missing if there is one, else the first gang that does not cover it all (so small
   gangs are used before a big one is broken into), and only when every gang would overshoot, the one
   that overshoots least.
2. Repeat until the shortfall is covered and the optional node-level check ``fits`` agrees.
3. Spare again, last chosen first, every victim the others make unnecessary: the result is
   irreducible (no victim can be left out).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction

from scheduling.model import Resources
from scheduling.queues.fair_share import FairShares
from scheduling.queues.queue_tree import QueueTree
from scheduling.queues.workloads import RunningGang
from scheduling.resources import RESOURCE_NAMES, ZERO, amount, is_zero, minus, plus, shortfall, total

Fits = Callable[[frozenset[str]], bool]
"""Whether the group would be placed if the gangs with these keys were gone (node-level simulation)."""


@dataclass(frozen=True, slots=True)
class VictimSearch:
    """What a victim set must achieve and may not break.

    Attributes:
        queue: the beneficiary's leaf queue.
        tree: the queues.
        shares: the fair shares every victim queue must keep.
        held: what every queue (leaves and parents) holds now.
        short: the resources the beneficiary lacks; only these are protected and counted.
        need: how much of each must be freed.
        capacity: the cluster's capacity, to compare overshoots across resources.
        within: when set, the ancestor of ``queue`` that victims must come from (``None``: anywhere).
        quota_owed: the beneficiary is below its deserved quota, so victim queues need keep only their
            own deserved quota, not their fair share: a quota is guaranteed, borrowed room is not.
    """

    queue: str
    tree: QueueTree
    shares: FairShares
    held: Mapping[str, Resources]
    short: tuple[str, ...]
    need: Resources
    capacity: Resources
    within: str | None = None
    quota_owed: bool = False

    def victim_side(self, queue: str) -> tuple[str, ...]:
        """The victim's queue and its ancestors below the common ancestor with the beneficiary."""
        mine = set(self.tree.path(self.queue))
        return tuple(q for q in self.tree.path(queue) if q not in mine)

    @property
    def floor_name(self) -> str:
        """What a victim queue keeps, in words."""
        return "quota" if self.quota_owed else "fair share"

    def floor(self, queue: str) -> Resources:
        """What ``queue`` keeps after evictions: its fair share, or its deserved quota when one is owed."""
        share = self.shares[queue]
        return share.deserved if self.quota_owed else share.fair_share

    def keeps_share(self, gang: RunningGang, taken: Mapping[str, Resources]) -> bool:
        """Whether each victim-side queue keeps its ``floor`` if ``gang`` goes after ``taken``."""
        for queue in self.victim_side(gang.queue):
            left = minus(minus(self.held.get(queue, ZERO), taken.get(queue, ZERO)), gang.requests)
            keep = self.floor(queue)
            if any(amount(gang.requests, r) and amount(left, r) < amount(keep, r) for r in self.short):
                return False
        return True

    def below_fair_share(self, gang: RunningGang, taken: Mapping[str, Resources]) -> Fraction:
        """How far below their fair shares the victim-side queues end if ``gang`` goes after ``taken``.

        Summed over the short resources, each as a fraction of the cluster's capacity so that GPUs and
        bytes compare; 0 when every queue keeps its fair share. A pure function of the allocations, so
        the choice it orders never depends on when the gangs happened to start.
        """
        deficit = Fraction(0)
        for queue in self.victim_side(gang.queue):
            left = minus(minus(self.held.get(queue, ZERO), taken.get(queue, ZERO)), gang.requests)
            fair = self.shares[queue].fair_share
            for r in self.short:
                if amount(gang.requests, r):
                    gap = amount(fair, r) - amount(left, r)
                    deficit += Fraction(max(0, gap), max(1, amount(self.capacity, r)))
        return deficit

    def rest(self, chosen: Sequence[RunningGang]) -> Resources:
        """What is still missing once ``chosen`` are gone."""
        return shortfall(self.need, total(g.requests for g in chosen))

    def take(self, taken: dict[str, Resources], gang: RunningGang) -> None:
        """Record ``gang`` as evicted in ``taken`` (per victim-side queue)."""
        for queue in self.victim_side(gang.queue):
            taken[queue] = plus(taken.get(queue, ZERO), gang.requests)


def _pick(search: VictimSearch, tier: Sequence[RunningGang], rest: Resources) -> RunningGang:
    wanted = [r for r in RESOURCE_NAMES if amount(rest, r) > 0]
    if not wanted:
        return tier[0]
    exact = next((g for g in tier if all(amount(g.requests, r) == amount(rest, r) for r in wanted)), None)
    if exact is not None:
        return exact
    partial = next((g for g in tier if any(amount(g.requests, r) < amount(rest, r) for r in wanted)), None)
    if partial is not None:
        return partial

    def overshoot(gang: RunningGang) -> Fraction:
        parts = (
            Fraction(amount(gang.requests, r) - amount(rest, r), max(1, amount(search.capacity, r)))
            for r in wanted
        )
        return sum(parts, Fraction(0))

    return min(tier, key=lambda g: (overshoot(g), tier.index(g)))


def _eligible(
    search: VictimSearch,
    candidates: Sequence[RunningGang],
    chosen: Sequence[RunningGang],
    taken: Mapping[str, Resources],
    rest: Resources,
) -> list[RunningGang]:
    """The candidates not chosen yet that may go next, in the candidates' order.

    Whether a gang may go is a pure function of its queue and requests (given what is taken and what
    is missing): it is judged once per kind of gang, not once per gang. Thousands of running gangs of a
    few shapes made this scan most of a reclaim pass.
    """
    verdicts: dict[tuple[str, Resources], bool] = {}
    taken_keys = {g.key for g in chosen}
    eligible = []
    for gang in candidates:
        if gang.key in taken_keys:
            continue
        kind = (gang.queue, gang.requests)
        verdict = verdicts.get(kind)
        if verdict is None:
            verdict = verdicts[kind] = search.keeps_share(gang, taken) and any(
                amount(gang.requests, r) and (amount(rest, r) or is_zero(rest)) for r in search.short
            )
        if verdict:
            eligible.append(gang)
    return eligible


def choose_victims(
    search: VictimSearch, candidates: Sequence[RunningGang], fits: Fits | None = None
) -> list[RunningGang] | None:
    """Return an irreducible victim set from ``candidates``, or ``None`` when no set suffices.

    ``candidates`` must already be whole, preemptible gangs past their minimum runtime, sorted by
    preference (lowest priority, then youngest, then name).
    """
    chosen: list[RunningGang] = []
    taken: dict[str, Resources] = {}

    def done(gangs: Sequence[RunningGang]) -> bool:
        return is_zero(search.rest(gangs)) and (fits is None or fits(frozenset(g.key for g in gangs)))

    while not done(chosen):
        rest = search.rest(chosen)
        eligible = _eligible(search, candidates, chosen, taken, rest)
        if not eligible:
            return None
        if search.quota_owed:
            deficits: dict[tuple[str, Resources], Fraction] = {}
            for g in eligible:  # like eligibility, a function of the gang's queue and requests
                if (g.queue, g.requests) not in deficits:
                    deficits[g.queue, g.requests] = search.below_fair_share(g, taken)
            least = min(deficits.values())
            eligible = [g for g in eligible if deficits[g.queue, g.requests] == least]
        lowest = min(g.priority for g in eligible)
        pick = _pick(search, [g for g in eligible if g.priority == lowest], rest)
        chosen.append(pick)
        search.take(taken, pick)
    for gang in reversed(list(chosen)):
        spared = [g for g in chosen if g is not gang]
        if done(spared):
            chosen = spared
    return chosen


def check_victims(search: VictimSearch, chosen: Sequence[RunningGang], fits: Fits | None = None) -> bool:
    """Simulate evicting ``chosen``: every one preemptible, every victim queue keeps its floor, room made."""
    taken: dict[str, Resources] = {}
    for gang in chosen:
        if not gang.preemptible or not search.keeps_share(gang, taken):
            return False
        search.take(taken, gang)
    return is_zero(search.rest(chosen)) and (fits is None or fits(frozenset(g.key for g in chosen)))
