"""Which queues are in force: each queue is judged on its own, and a bad one is set aside with its subtree.

Queues are written by many hands, and one mistake (a parent that does not exist, a cycle, a child whose
quota does not fit its parent's, a value phalanx cannot read) must not take every other team's queue
down with it. So no rule here refuses the set as a whole: a queue that breaks a rule is *set aside*, with
every queue below it, each with a sentence saying why, and every other queue stays in force exactly as it
would if the bad one were not there (``tests/scheduling/queues/test_validation.py`` checks that on random
trees). Pods that name a queue set aside are in no queue: the extender turns them down with the queue's
reason, and what they hold comes off every queue's capacity (``scheduling.queues.view``).

The rules, in the order they apply:

1. **The queue itself** (the API server refuses most of these at admission, through the CRD's schema and
   CEL rules; phalanx checks again, since a queue may predate a rule): a value the adapter could not read
   (``Queue.problem``), a negative quota, weight or limit, a limit below the quota, a negative minimum
   runtime, a parent that names the queue itself.
2. **Its place in the tree**, found by walking up the parent chain (iteratively): a parent that does not
   exist or is set aside, a parent cycle (every queue of the cycle), a child of the default queue (which
   takes the workloads that name no queue, so it must stay a leaf), a queue more than
   ``MAX_QUEUE_DEPTH`` levels deep.
3. **Its quota within its parent's**: a parent's children keep their quotas in the order they were
   created (then by name); a child whose quota would bring its siblings' sum over the parent's quota, for
   any resource, is set aside and the older siblings keep theirs: the queue that came last and does not
   fit is the one that is wrong.

Every queue is visited a bounded number of times, so thousands of queues, or a chain thousands deep,
cost linear time and never meet Python's recursion limit.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from scheduling.resources import RESOURCE_NAMES, format_amount

if TYPE_CHECKING:  # model.py builds its tree with this module; the names are only for the types here
    from scheduling.cluster.queue_specs import Queue

MAX_QUEUE_DEPTH = 16
"""The most levels a queue tree may have (a top-level queue is on level 1): far more than any
organisation chart needs, few enough that every walk up a queue's ancestors stays short."""


@dataclass(frozen=True, slots=True)
class Verdict:
    """The queues in force and the queues set aside.

    Attributes:
        in_force: the queues in force, by name.
        depth: each queue in force's level (1 at the top).
        rejected: each queue set aside, with the sentence that says why.
    """

    in_force: Mapping[str, Queue]
    depth: Mapping[str, int]
    rejected: Mapping[str, str]


def field_problem(queue: Queue) -> str | None:
    """Why ``queue`` is invalid on its own (rule 1), or ``None``; the first problem found."""
    if queue.problem is not None:
        return f"queue {queue.name}: {queue.problem}"
    for resource in RESOURCE_NAMES:
        q = queue.of(resource)
        where = f"queue {queue.name}: {resource}"
        if q.quota < 0:
            return f"{where} quota is {format_amount(resource, q.quota)}; it must be 0 or more"
        if q.over_quota_weight < 0:
            return f"{where} overQuotaWeight is {q.over_quota_weight}; it must be 0 or more"
        if q.limit is not None and q.limit < 0:
            return f"{where} limit is {format_amount(resource, q.limit)}; it must be 0 or more"
        if q.limit is not None and q.limit < q.quota:
            limit, quota = format_amount(resource, q.limit), format_amount(resource, q.quota)
            return f"{where} limit {limit} is below its quota {quota}"
    if queue.min_runtime_seconds is not None and queue.min_runtime_seconds < 0:
        return f"queue {queue.name}: minRuntimeSeconds is {queue.min_runtime_seconds}; it must be 0 or more"
    if queue.parent == queue.name:
        return f"queue {queue.name}: parent names the queue itself"
    return None


class _Judge:
    """Rules 2 and 3 over one set of queues (see the module docstring)."""

    def __init__(self, by_name: Mapping[str, Queue], rejected: dict[str, str], default: str) -> None:
        self.by_name = by_name
        self.rejected = rejected
        self.default = default
        self.fault = {name: name for name in rejected}
        """Queue set aside -> the queue whose own fault it is (itself, or an ancestor)."""
        self.depth: dict[str, int] = {}

    def set_aside(self, name: str, reason: str) -> None:
        self.rejected[name] = reason
        self.fault[name] = name

    def below(self, name: str, culprit: str) -> None:
        """Set ``name`` aside because ``culprit``, above it, is at fault.

        The culprit's own sentence is quoted, never a chain of them: a subtree thousands deep keeps
        sentences of one size.
        """
        parent = self.by_name[name].parent
        relation = "parent" if parent == culprit else "ancestor"
        why = self.rejected[culprit]
        self.rejected[name] = f"queue {name}: its {relation} {culprit} is set aside ({why})"
        self.fault[name] = self.fault[culprit]

    def place(self, start: str) -> None:
        """Rule 2 for ``start`` and every ancestor not judged yet: walk up, then judge top-down."""
        chain: list[str] = []
        index: dict[str, int] = {}
        node: str | None = start
        while node is not None and node not in self.depth and node not in self.fault:
            if node in index:  # a parent cycle: every queue from ``node`` on
                cycle = chain[index[node] :]
                self._cycle(cycle)
                chain = chain[: index[node]]
                break
            index[node] = len(chain)
            chain.append(node)
            parent = self.by_name[node].parent
            if parent is not None and parent not in self.by_name:
                self.set_aside(chain.pop(), f"queue {node}: parent {parent} does not exist")
                break
            node = parent
        for name in reversed(chain):
            self._judge(name)

    def _judge(self, name: str) -> None:
        """Rule 2 for one queue whose parent is judged already (or which has none)."""
        parent = self.by_name[name].parent
        if parent is not None and parent in self.fault:
            self.below(name, self.fault[parent])
            return
        level = 1 if parent is None else self.depth[parent] + 1
        if parent == self.default:
            self.set_aside(
                name,
                f"queue {name}: its parent is the default queue, which takes the workloads that name no "
                "queue and so cannot have child queues",
            )
        elif level > MAX_QUEUE_DEPTH:
            self.set_aside(name, f"queue {name}: it is {level} levels deep; phalanx allows {MAX_QUEUE_DEPTH}")
        else:
            self.depth[name] = level

    def _cycle(self, cycle: list[str]) -> None:
        """Set aside every queue of a parent cycle, with one sentence from its smallest name round again."""
        first = cycle.index(min(cycle))
        ordered = cycle[first:] + cycle[:first]  # child -> parent, as the chain was walked
        path = " -> ".join([*ordered, ordered[0]])
        members = ", ".join(sorted(cycle))
        for name in cycle:
            self.set_aside(name, f"queue {name}: queues {members} form a parent cycle ({path})")

    def fit_quotas(self) -> None:
        """Rule 3, parents before children: the children that came last and do not fit are set aside."""
        kids: dict[str, list[str]] = {}
        for name in self.depth:
            parent = self.by_name[name].parent
            if parent is not None:
                kids.setdefault(parent, []).append(name)
        for parent in sorted(kids, key=lambda n: (self.depth[n], n)):
            if parent in self.fault:
                continue
            own = self.by_name[parent]
            used = dict.fromkeys(RESOURCE_NAMES, 0)
            kept: list[str] = []
            for kid in sorted(kids[parent], key=lambda n: (self.by_name[n].created, n)):
                if kid in self.fault:
                    continue
                quota = self.by_name[kid]
                over = [r for r in RESOURCE_NAMES if used[r] + quota.of(r).quota > own.of(r).quota]
                if not over:
                    for r in RESOURCE_NAMES:
                        used[r] += quota.of(r).quota
                    kept.append(kid)
                    continue
                r = over[0]
                older = ", ".join(f"{k} {format_amount(r, self.by_name[k].of(r).quota)}" for k in kept)
                self.set_aside(
                    kid,
                    f"queue {kid}: its {r} quota {format_amount(r, quota.of(r).quota)} does not fit in its "
                    f"parent {parent}'s quota {format_amount(r, own.of(r).quota)}"
                    + (f" beside its older siblings ({older})" if older else ""),
                )
                self._subtree_below(kid, kids)

    def _subtree_below(self, top: str, kids: Mapping[str, list[str]]) -> None:
        stack = list(kids.get(top, ()))
        while stack:
            name = stack.pop()
            self.below(name, top)
            stack.extend(kids.get(name, ()))


def judge(queues: Iterable[Queue], default: Queue) -> Verdict:
    """Apply the rules to ``queues`` (names unique); ``default`` is the default queue when none is given.

    A default queue set aside is replaced by ``default``, so that the workloads that name no queue always
    have one; its reason stays in ``rejected`` for its status.
    """
    by_name: dict[str, Queue] = {}
    rejected: dict[str, str] = {}
    for queue in queues:
        by_name[queue.name] = queue
        problem = field_problem(queue)
        if problem is not None:
            rejected[queue.name] = problem
    given_default = by_name.get(default.name)
    if given_default is None:
        by_name[default.name] = default
    judge_ = _Judge(by_name, rejected, default.name)
    for name in sorted(by_name):
        judge_.place(name)
    judge_.fit_quotas()
    in_force = {name: by_name[name] for name in sorted(by_name) if name not in rejected}
    depth = {name: judge_.depth[name] for name in in_force}
    if default.name not in in_force:  # the user's default queue is set aside: the implicit one stands in
        in_force[default.name], depth[default.name] = default, 1
        in_force = dict(sorted(in_force.items()))
        rejected[default.name] += f"; the implicit {default.name} queue (no quota, weight 1) stands in"
    return Verdict(in_force, depth, dict(sorted(rejected.items())))
