"""What one admission pass decides: its limits, the groups it releases and those it keeps gated.

``scheduling.admission.release.release`` returns a ``ReleaseDecision``; the placement manager ungates the
released groups in that order and records each kept group's sentence on its pods' events.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from scheduling.admission.flight import ReleasedBook


@dataclass(frozen=True, slots=True)
class GateSettings:
    """How much ``release`` lets into kube-scheduler's queue at once.

    Attributes:
        max_unbound_gpus: GPUs released but not yet bound, at most: kube-scheduler's queue stays short.
            Not with ``plan_on_pod``: a pod released with its plan is bound at kube-scheduler's first
            try, so a long queue costs it nothing, and waiting for a pass and an ungating patch each
            was what a backlog paid most (docs/design/framework-sidecar.md, "What the gate costs").
        max_unbound_pods: pods released but not yet bound, at most (CPU-only pods count here); not with
            ``plan_on_pod`` either.
        release_ttl: seconds a released group counts as in flight if it is not bound by then (it waits in
            kube-scheduler for what the core does not model, such as inter-pod affinity).
        starve_after: seconds a skipped group waits before it keeps its GPUs from those behind it.
        unknown_group_grace: seconds a gang member waits for its PodGroup before it is released anyway
            (an operator creates both; the cache may see the pod first).
        nominate_from_nodes: a pod on its own is given the node its plan found (``Released.nodes``,
            which the release pass nominates) only on a cluster of at least this many nodes. The
            nomination is one more write (about 6 CPU-ms per pod across the API server, etcd and the
            watchers, measured on two shared cores), and the Filter pass it spares kube-scheduler costs
            about 4 CPU-ms per 1,000 nodes: a loss at 1,000 nodes, a gain of 0.74x -> 1.12x the
            baseline's throughput at 5,000 (docs/design/admission-gates.md). A gang's members are always
            given theirs: their first member's full Filter pass and the race of the extender's own
            nominations against kube-scheduler go with it.
        plan_on_pod: every pod the pass places carries its plan, node and GPU indices
            (``Released.plans``, written on the pod as it is ungated, or by the gate webhook for a pod
            let in at the door), and nothing is nominated: the
            framework sidecar's plugin places the pod on its plan (docs/design/framework-sidecar.md).
            A group in flight keeps its plan while it still holds, and is planned again when it no
            longer does (``ReleaseDecision.replanned``).
        plan_refused_after: with ``plan_on_pod``, seconds after a plan was sealed past which a pod
            kube-scheduler still turns down (``Pod.unschedulable``) counts as refused on its planned
            node for a reason the core does not model (a host port, inter-pod affinity, a volume): it
            is planned again on another node, and that node is not planned for it again while it
            waits (``ReleasedBook.refused``). Longer than kube-scheduler's longest backoff (10 s), so
            that it has tried the plan by then.
    """

    max_unbound_gpus: int = 128
    max_unbound_pods: int = 256
    release_ttl: float = 60.0
    starve_after: float = 300.0
    unknown_group_grace: float = 10.0
    nominate_from_nodes: int = 2000
    plan_on_pod: bool = False
    plan_refused_after: float = 20.0


DEFAULT_GATE_SETTINGS = GateSettings()


@dataclass(frozen=True, slots=True, order=True)
class PodPlan:
    """Where a pod is planned: the node and the GPU indices it gets there (``phalanx.io/plan``).

    ``why`` says why a pod in flight is planned again (``ReleaseDecision.replanned``); empty for a
    first plan.
    """

    pod: str
    node: str
    gpus: tuple[int, ...]
    why: str = ""


@dataclass(frozen=True, slots=True)
class Released:
    """A group to ungate now: the keys of its gated pods, sorted, and why it goes.

    ``nodes`` pairs each pod the pass placed with the node its plan puts it on, by pod key: the node
    kube-scheduler is told to try first (``status.nominatedNodeName``, ``placement.release_pass``). Empty
    for a group released for another reason than room (preemption, a pod the pass cannot reason about).
    ``plans`` is each placed pod's plan, with ``GateSettings.plan_on_pod`` only (``nodes`` is then empty).
    """

    group: str
    pods: tuple[str, ...]
    reason: str
    nodes: tuple[tuple[str, str], ...] = ()
    plans: tuple[PodPlan, ...] = ()


class KeptRule(enum.Enum):
    """The rule that keeps a group gated; the value labels the idle-GPU metric."""

    UNKNOWN = "unknown"
    """Its PodGroup does not exist yet (within the grace)."""
    MEMBERS = "members"
    """A gang with fewer pods than ``minMember``."""
    QUEUE = "queue"
    """Its queue's rules (limit, non-preemptible within quota)."""
    BUDGET = "in_flight_budget"
    """kube-scheduler's queue is full enough (``max_unbound_gpus``, ``max_unbound_pods``)."""
    ROOM = "room"
    """Fewer GPUs free in all than it needs."""
    NODE = "node"
    """Enough in all, but no node (or set of nodes) takes it: fragmentation, shape, constraints."""
    STARVING = "kept_for_starving"
    """Room it would take is kept for a group that has waited longer than ``starve_after``."""
    NEVER = "never_fits"
    """It cannot be placed even on the cluster's schedulable nodes emptied."""
    VIEW = "view"
    """The queue view does not list it yet."""


@dataclass(frozen=True, slots=True)
class Kept:
    """A group that stays gated, with the sentence why (for its pods' events and ``phalanx why``).

    Attributes:
        group: the group's key.
        reason: the sentence.
        rule: the rule that keeps it.
        gpus: the GPUs its waiting pods need (to say which rule idle GPUs wait on).
    """

    group: str
    reason: str
    rule: KeptRule = KeptRule.ROOM
    gpus: int = 0


@dataclass(frozen=True, slots=True)
class ReleaseDecision:
    """The outcome of one pass.

    Attributes:
        released: groups to ungate, in the order decided (unknown ones first, then the fair order).
        kept: groups that stay gated, in the same order; groups the view does not list yet come last,
            by key.
        in_flight: the book to keep for the next pass: groups released and not bound yet, with when
            (this pass's at ``now``; the caller drops one whose patch failed, ``ReleasedBook.without``).
        idle: GPUs free while groups wait gated, by the rule that keeps them waiting (``KeptRule``
            values, and ``in_flight`` for GPUs held for groups released and not bound yet); see
            ``scheduling.admission.release`` for how they are attributed.
        replanned: pods in flight whose plan no longer holds (or that have none), planned again, to
            write on them (``GateSettings.plan_on_pod`` only).
    """

    released: tuple[Released, ...]
    kept: tuple[Kept, ...]
    in_flight: ReleasedBook = field(default_factory=ReleasedBook)
    idle: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))
    replanned: tuple[PodPlan, ...] = ()
