"""What ``phalanx why`` answers, as frozen records: the cause, the queue's view, the gang, the nodes, a plan.

Everything here is data a driver renders (a table, JSON, YAML) without computing anything: amounts are
integers in the core's units (GPUs, milli-CPU, bytes), lists are sorted, and every "no" is a sentence a
user can read. ``scheduling.explain.core`` fills them in from the same functions ``filter`` runs.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class Cause(enum.Enum):
    """The main reason, one per explanation; the value is a stable name for scripts and tests."""

    BOUND = "bound"
    FINISHED = "finished"
    TERMINATING = "terminating"
    NOT_PHALANX = "not_phalanx"
    FITS_NOW = "fits_now"
    QUEUE_LIMIT = "queue_limit"
    NON_PREEMPTIBLE_QUOTA = "non_preemptible_quota"
    HELD_FOR_AHEAD = "held_for_ahead"
    UNKNOWN_QUEUE = "unknown_queue"
    NO_PODGROUP = "no_podgroup"
    GANG_INCOMPLETE = "gang_incomplete"
    EXCLUDED = "excluded"
    TOO_LARGE = "too_large"
    FRAGMENTED = "fragmented"
    NO_CAPACITY = "no_capacity"


@dataclass(frozen=True, slots=True)
class ShareFigures:
    """One resource of a queue, as fair share sees it now (``scheduling.queues``).

    Attributes:
        resource: ``nvidia.com/gpu``, ``cpu`` or ``memory``.
        quota: the configured quota.
        limit: the configured limit, or ``None`` when there is none.
        deserved: the in-quota share now (quota, up to demand).
        fair_share: the fair share now (deserved plus the over-quota part by weight).
        allocated: what the queue's workloads hold (and promises count).
        requested: what this group's waiting members request.
    """

    resource: str
    quota: int
    limit: int | None
    deserved: int
    fair_share: int
    allocated: int
    requested: int


@dataclass(frozen=True, slots=True)
class QueuePlace:
    """The group's place in its queue's fair order, and the queue rule that holds it if one does.

    Attributes:
        queue: the leaf queue the group belongs to.
        position: 1-based place among every pending group in the order they get their turn; ``None``
            when the queue view does not list it (its queue is unknown).
        pending: how many groups wait in all.
        in_queue: 1-based place among the pending groups of its own queue (``None`` as ``position``).
        ahead: the first groups ahead of it in the fair order, nearest the head first (at most five).
        standing: where its queue would stand with it: ``within deserved quota``, ``within fair share``
            or ``over fair share``.
        shares: the queue's figures for GPUs and for each resource a quota or limit governs.
        rule: the rule that holds it (``limit``, ``non_preemptible_quota``, ``held_for_ahead``) or
            ``None`` when its queue lets it through.
        sentence: the rule's own sentence, exactly as the filter gives it to kube-scheduler; "admitted"
            when none holds it.
        holders: for ``held_for_ahead``, the groups ahead whose room it would take.
        problems: why the Queue objects are invalid, when they are (the default queue is then in force).
    """

    queue: str
    position: int | None
    pending: int
    in_queue: int | None
    ahead: tuple[str, ...]
    standing: str
    shares: tuple[ShareFigures, ...]
    rule: str | None
    sentence: str
    holders: tuple[str, ...] = ()
    problems: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class GangCount:
    """A gang's members against its ``minMember``.

    Attributes:
        min_member: ``spec.minMember`` (0 when the PodGroup does not exist).
        present: live members (not being deleted).
        bound: members on a node and holding it.
        waiting: members without a node.
        podgroup: the PodGroup object exists.
    """

    min_member: int
    present: int
    bound: int
    waiting: int
    podgroup: bool = True


@dataclass(frozen=True, slots=True)
class NodeGroup:
    """Nodes turned down for the same reason (or able to take the pod), with how many and which.

    Attributes:
        kind: the stable reason name (``scheduling.reasons.Reason`` values, ``fits`` for nodes with room).
        message: the reason's sentence, shared by every node of the group.
        count: how many nodes.
        nodes: their names, sorted.
    """

    kind: str
    message: str
    count: int
    nodes: tuple[str, ...]

    @property
    def text(self) -> str:
        """``3 nodes with too few free GPUs (2 free, pod needs 4)``: the count read into the sentence."""
        head = f"{self.count} node{'' if self.count == 1 else 's'}"
        if self.message.startswith("node(s) "):
            return f"{head} {self.message.removeprefix('node(s) ')}"
        return f"{head}: {self.message}"


@dataclass(frozen=True, slots=True)
class PlacedPod:
    """Where one pod is, or would be: node and GPU indices."""

    pod: str
    node: str
    gpus: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class WhatIf:
    """The plan the core would make, now or once some running groups finish.

    Attributes:
        finished: the running groups (``namespace/name``) that finish first; empty: the cluster as it is.
        freed_gpus: the GPUs they hold.
        plan: every waiting member's node and GPU indices then, by pod name.
    """

    finished: tuple[str, ...]
    freed_gpus: int
    plan: tuple[PlacedPod, ...]


@dataclass(frozen=True, slots=True)
class Explanation:
    """Why a pod or PodGroup is where it is: the answer of ``phalanx why``.

    Attributes:
        kind: ``pod`` or ``podgroup``.
        key: ``namespace/name`` of what was asked about.
        cause: the main reason.
        verdict: the main reason in one line.
        filter_message: what phalanx's filter tells kube-scheduler for it now (the queue's or gang's
            sentence), when it gives one sentence for every node.
        queue: its place in the fair order, for a waiting phalanx pod.
        gang: its gang's members, for a gang.
        nodes: every node, grouped by why it is turned down (or ``fits``), the largest group first.
        bound: where it (or its gang's bound members) runs, by pod name.
        what_if: the plan it gets now (``fits_now``) or once the named running groups finish.
        admission: for a group still carrying the admission gate, what the placement manager's release
            pass decides for it now (``scheduling.admission.release``): kube-scheduler has not tried it.
    """

    kind: str
    key: str
    cause: Cause
    verdict: str
    filter_message: str | None = None
    queue: QueuePlace | None = None
    gang: GangCount | None = None
    nodes: tuple[NodeGroup, ...] = ()
    bound: tuple[PlacedPod, ...] = ()
    what_if: WhatIf | None = None
    admission: str | None = None
