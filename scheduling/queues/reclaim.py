"""Reclaim: give a queue below its fair share its share back by evicting whole gangs from queues above.

Rules (docs/design/queues.md §5; the failure modes of docs/design/anchors.md §4.B):

- Only for a group whose queue stays within its fair share with it, in the resources that are short,
  and that its queue's own rules let it start (``scheduling.queues.rules``). When an ancestor would go over
  its own fair share, only queues under the deepest such ancestor can give room (a team takes from its
  siblings, not from another department), and they give enough to keep every ancestor within its share.
- Only whole, preemptible gangs of other queues; never one younger than its queue's minimum runtime.
- A victim's queue (and each of its ancestors below the common ancestor with the beneficiary) must stay
  at or above its own fair share in the short resources after the eviction. The beneficiary ends at or
  below its fair share and every victim queue at or above its own, so the victim cannot reclaim the
  capacity back under the same fair shares: no ping-pong (Kueue #3779, #14543).
- A quota is guaranteed. When no such set exists and the beneficiary is below its deserved quota (its
  leaf and every ancestor, in the short resources), victim queues need keep only their own deserved
  quota, and gangs of the queues that end least below their fair share go first (those that keep it
  before all others), whatever the gangs' ages. Gangs come whole, so a queue
  can end up over its fair share by one gang while another sits below its quota (B's gang got the room
  before A's); this undoes that. Still no ping-pong: the victim keeps its quota, so it is owed none,
  and the beneficiary ends within its fair share, which the first rule protects.
- Just enough (``scheduling.queues.victims``): lowest priority first, youngest first, small gangs before a
  big one is broken into, and every victim the others make unnecessary spared again, so no victim can be
  left out and a 48-GPU request never takes 376 (KAI PR #1565).
- Simulated before it is returned: the freed capacity covers the shortfall, every queue rule above
  still holds, and ``fits`` (optional, e.g. the gang planner on a snapshot without the victims) agrees.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import partial

from scheduling.model import Resources
from scheduling.queues.fair_share import FairShares
from scheduling.queues.ordering import queue_states
from scheduling.queues.queue_tree import QueueTree
from scheduling.queues.rules import check_rules
from scheduling.queues.victims import Fits, VictimSearch, check_victims, choose_victims
from scheduling.queues.workloads import PendingGroup, RunningGang
from scheduling.resources import (
    RESOURCE_NAMES,
    ZERO,
    amount,
    format_amount,
    format_quantity,
    is_zero,
    minus,
    plus,
    resources_of,
    shortfall,
    total,
)


class ReclaimOutcome(enum.Enum):
    """How a reclaim attempt ended, for metrics."""

    EVICT = "evict"
    FITS = "fits"
    NOT_STARVED = "not_starved"
    NO_VICTIMS = "no_victims"


@dataclass(frozen=True, slots=True)
class Victim:
    """A gang reclaim chose to evict whole, and why (the sentence names the beneficiary and the rule).

    Queue arithmetic: ``scheduling.queues.reclaim_planner`` turns each into the ``Eviction`` actions of its
    bound pods, the plan the drivers apply.
    """

    gang: str
    queue: str
    requests: Resources
    reason: str


@dataclass(frozen=True, slots=True)
class ReclaimChoice:
    """The answer for one starved group: gangs to evict, or why none are.

    Attributes:
        group: the beneficiary group's key.
        queue: its queue.
        outcome: how the attempt ended.
        victims: the gangs to evict, whole, in the order they were chosen; empty unless ``EVICT``.
        message: one sentence for the group's events and the reclaim log.
    """

    group: str
    queue: str
    outcome: ReclaimOutcome
    victims: tuple[Victim, ...]
    message: str


def _at_least(a: Resources, b: Resources) -> Resources:
    return resources_of({r: max(amount(a, r), amount(b, r)) for r in RESOURCE_NAMES})


def _held_by_queue(tree: QueueTree, allocated: Mapping[str, Resources]) -> dict[str, Resources]:
    held: dict[str, Resources] = {}
    for leaf in tree.leaves():
        for queue in tree.path(leaf):
            held[queue] = plus(held.get(queue, ZERO), allocated.get(leaf, ZERO))
    return held


def _owed_quota(
    tree: QueueTree, shares: FairShares, held: Mapping[str, Resources], queue: str, short: Sequence[str]
) -> bool:
    """Whether ``queue`` and every ancestor hold less than their deserved quota in each short resource."""
    return all(
        amount(held.get(q, ZERO), r) < amount(shares[q].deserved, r) for q in tree.path(queue) for r in short
    )


def _first_short(search: VictimSearch, gang: RunningGang) -> str:
    return next((r for r in search.short if amount(gang.requests, r)), search.short[0])


def _reasons(search: VictimSearch, group: PendingGroup, chosen: Sequence[RunningGang]) -> tuple[Victim, ...]:
    queue = group.queue
    victims, taken = [], dict[str, Resources]()
    for gang in chosen:
        r = _first_short(search, gang)
        floor_v = amount(search.floor(gang.queue), r)
        over = amount(search.held[gang.queue], r) - amount(taken.get(gang.queue, ZERO), r) - floor_v
        held_q, need_q = amount(search.held[queue], r), amount(group.requests, r)
        fair_q = amount(search.shares[queue].fair_share, r)
        victim = (
            f"queue {gang.queue} is {format_quantity(r, over)} over its {search.floor_name} "
            f"{format_amount(r, floor_v)}"
        )
        if search.quota_owed:
            deserved_q = amount(search.shares[queue].deserved, r)
            mine = (
                f"{queue} holds {format_amount(r, held_q)}, below its quota {format_amount(r, deserved_q)}, "
                f"and needs {format_amount(r, need_q)}"
            )
        elif held_q + need_q == fair_q:
            mine = (
                f"{queue} needs {format_amount(r, need_q)} to reach its fair share {format_amount(r, fair_q)}"
            )
        else:
            mine = (
                f"{queue} needs {format_amount(r, need_q)} and stays within its fair share "
                f"{format_amount(r, fair_q)} (it holds {format_amount(r, held_q)})"
            )
        reason = f"reclaim: {victim}; {mine} (group {group.key})"
        victims.append(Victim(gang.key, gang.queue, gang.requests, reason))
        taken[gang.queue] = plus(taken.get(gang.queue, ZERO), gang.requests)
    return tuple(victims)


def _why_not(
    search: VictimSearch,
    group: PendingGroup,
    others: Sequence[RunningGang],
    candidates: Sequence[RunningGang],
    now: float,
) -> str:
    r = search.short[0]
    young = sum(
        1 for g in others if g.preemptible and now - g.started_at < search.tree.min_runtime_seconds(g.queue)
    )
    pinned = sum(1 for g in others if not g.preemptible)
    reachable, taken = ZERO, dict[str, Resources]()
    below = 0
    for gang in sorted(candidates, key=lambda g: (g.priority, -g.started_at, g.key)):
        if search.keeps_share(gang, taken):
            reachable = plus(reachable, gang.requests)
            search.take(taken, gang)
        else:
            below += 1
    parts = [
        f"{format_quantity(r, amount(reachable, r))} can be taken from queues over their {search.floor_name}"
    ]
    if pinned:
        parts.append(f"{pinned} gang(s) are not preemptible")
    if young:
        parts.append(f"{young} gang(s) are younger than their queue's minimum runtime")
    if below:
        parts.append(f"{below} gang(s) would push their queue below its {search.floor_name}")
    if is_zero(shortfall(search.need, reachable)):
        parts.append("but the node-level check found no victim set that makes room where the group fits")
    if search.within is not None:
        parts.insert(
            0, f"its parent {search.within} is at its fair share, so only queues under it can give room"
        )
    return (
        f"reclaim for {group.key} (queue {group.queue}): cannot free "
        f"{format_quantity(r, amount(search.need, r))}: " + "; ".join(parts)
    )


def choose_reclaim(
    group: PendingGroup,
    *,
    tree: QueueTree,
    shares: FairShares,
    allocated: Mapping[str, Resources],
    running: Sequence[RunningGang],
    free: Resources,
    now: float,
    fits: Fits | None = None,
    non_preemptible: Mapping[str, Resources] | None = None,
) -> ReclaimChoice:
    """Choose the gangs to evict so that ``group`` fits, or say why nothing can be reclaimed.

    Args:
        group: a pending group of a queue below its fair share.
        tree: the validated queues (for the hierarchy and minimum runtimes).
        shares: the fair-share result.
        allocated: per leaf queue, what its workloads hold now.
        running: every running gang that could be a victim.
        free: the cluster's free capacity now.
        now: the current time, in the seconds of ``RunningGang.started_at``.
        fits: optional node-level check of a victim set (see ``Fits``); aggregate amounts otherwise.
        non_preemptible: per queue, what its non-preemptible gangs of ``running`` hold
            (``non_preemptible_by_queue``), when the caller has it: victims are preemptible, so it holds
            for a whole pass.
    """
    need = shortfall(group.requests, free)
    short = tuple(r for r in RESOURCE_NAMES if amount(need, r) > 0)
    if not short:
        return ReclaimChoice(
            group.key, group.queue, ReclaimOutcome.FITS, (), f"{group.key} fits; nothing to reclaim"
        )
    held_apart = non_preemptible_by_queue(running) if non_preemptible is None else non_preemptible
    admission = check_rules(group, queue_states(tree, shares, allocated, held_apart)[group.queue])
    if not admission.ok:
        return ReclaimChoice(group.key, group.queue, ReclaimOutcome.NOT_STARVED, (), admission.reason)
    held = _held_by_queue(tree, allocated)
    for r in short:
        with_group = amount(held.get(group.queue, ZERO), r) + amount(group.requests, r)
        fair = amount(shares[group.queue].fair_share, r)
        if with_group > fair:
            message = (
                f"queue {group.queue}: with {group.key} it would hold {format_quantity(r, with_group)}, "
                f"over its fair share {format_amount(r, fair)}; "
                "reclaim only gives a queue back its fair share"
            )
            return ReclaimChoice(group.key, group.queue, ReclaimOutcome.NOT_STARVED, (), message)
    target, within = need, None
    for queue in tree.path(group.queue)[:-1]:
        excess = shortfall(plus(held.get(queue, ZERO), group.requests), shares[queue].fair_share)
        excess = resources_of({r: amount(excess, r) for r in short})
        if not is_zero(excess):
            target, within = _at_least(target, excess), queue
    search = VictimSearch(group.queue, tree, shares, held, short, target, shares.capacity, within)
    others = [
        g
        for g in running
        if g.queue != group.queue
        and any(amount(g.requests, r) for r in short)
        and (within is None or within in tree.path(g.queue))
    ]
    runtimes = {q: tree.min_runtime_seconds(q) for q in {g.queue for g in others}}
    candidates = sorted(
        (g for g in others if g.preemptible and now - g.started_at >= runtimes[g.queue]),
        key=lambda g: (g.priority, -g.started_at, g.key),
    )
    chosen = choose_victims(search, candidates, fits)
    failed = chosen is None or not check_victims(search, chosen, fits)
    if failed and _owed_quota(tree, shares, held, group.queue, short):
        search = replace(search, quota_owed=True)
        chosen = choose_victims(search, candidates, fits)
    if chosen is None or not check_victims(search, chosen, fits):
        message = _why_not(search, group, others, candidates, now)
        return ReclaimChoice(group.key, group.queue, ReclaimOutcome.NO_VICTIMS, (), message)
    victims = _reasons(search, group, chosen)
    freed = total(g.requests for g in chosen)
    message = (
        f"reclaim for {group.key} (queue {group.queue}): evict {len(chosen)} gang(s) holding "
        f"{format_quantity(short[0], amount(freed, short[0]))} to free the "
        f"{format_quantity(short[0], amount(need, short[0]))} it lacks"
    )
    if within is not None:
        message += f", from queues under {within}, which stays within its fair share"
    return ReclaimChoice(group.key, group.queue, ReclaimOutcome.EVICT, victims, message)


def non_preemptible_by_queue(running: Sequence[RunningGang]) -> dict[str, Resources]:
    """Per queue, what its non-preemptible gangs of ``running`` hold (its rules count them apart)."""
    held: dict[str, Resources] = {}
    for gang in running:
        if not gang.preemptible:
            held[gang.queue] = plus(held.get(gang.queue, ZERO), gang.requests)
    return held


def choose_reclaims(
    groups: Sequence[PendingGroup],
    *,
    tree: QueueTree,
    shares: FairShares,
    allocated: Mapping[str, Resources],
    running: Sequence[RunningGang],
    free: Resources,
    now: float,
    fits: Callable[[PendingGroup, frozenset[str]], bool] | None = None,
) -> tuple[ReclaimChoice, ...]:
    """Plan reclaim for several starved groups in turn (``order_pending`` order), one pass of the loop.

    Each choice sees the world the choices before it leave: their victims gone, their groups running. So no
    gang is chosen twice, and a second group of the same queue counts the first against the fair share.
    The fair shares stay those given, for the whole pass.
    """
    held, alive, spare = dict(allocated), list(running), free
    non_preemptible = non_preemptible_by_queue(running)  # victims are preemptible: no choice changes it
    choices = []
    for group in groups:
        check = None if fits is None else partial(fits, group)
        choice = choose_reclaim(
            group,
            tree=tree,
            shares=shares,
            allocated=held,
            running=alive,
            free=spare,
            now=now,
            fits=check,
            non_preemptible=non_preemptible,
        )
        choices.append(choice)
        if choice.outcome not in (ReclaimOutcome.EVICT, ReclaimOutcome.FITS):
            continue
        gone = {v.gang for v in choice.victims}
        for victim in choice.victims:
            held[victim.queue] = minus(held.get(victim.queue, ZERO), victim.requests)
            spare = plus(spare, victim.requests)
        if gone:  # a group that fits evicts nothing: walking every running gang for it cost O(groups x gangs)
            alive = [g for g in alive if g.key not in gone]
        spare = minus(spare, group.requests)
        held[group.queue] = plus(held.get(group.queue, ZERO), group.requests)
    return tuple(choices)
