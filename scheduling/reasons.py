"""Why a node was turned down, in words a user reads in ``kubectl describe pod``.

kube-scheduler folds the extender's per-node messages into one ``FailedScheduling`` event by counting
identical strings ("0/3 nodes are available: 2 node(s) had too few free GPUs (2 free, 4 needed)").
So a message names the situation, not the node, and nodes in the same situation share one message.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass

_FIGURES = re.compile(r"\d+")


class Code(enum.Enum):
    """How kube-scheduler should treat a rejection (docs/design/extender-protocol.md §2.3).

    ``UNSCHEDULABLE`` goes to ``FailedNodes``: evicting pods on that node could make room, so the node is
    a preemption candidate. ``UNRESOLVABLE`` goes to ``FailedAndUnresolvableNodes``: no eviction helps.
    """

    UNSCHEDULABLE = "Unschedulable"
    UNRESOLVABLE = "UnschedulableAndUnresolvable"


class Reason(enum.Enum):
    """Stable, metric-friendly names of the rejection reasons."""

    UNKNOWN_NODE = "unknown_node"
    NOT_READY = "not_ready"
    CORDONED = "cordoned"
    TOO_FEW_GPUS = "too_few_gpus"
    TOO_FEW_FREE_GPUS = "too_few_free_gpus"
    UNREADABLE_TOPOLOGY = "unreadable_topology"
    GPUS_REFUSED = "gpus_refused"
    RESERVED = "reserved"
    GANG_WAITING = "gang_waiting"
    QUEUE_HOLD = "queue_hold"
    TAINT = "taint"
    NODE_SELECTOR = "node_selector"
    NODE_AFFINITY = "node_affinity"
    INSUFFICIENT = "insufficient"


@dataclass(frozen=True, slots=True)
class Rejection:
    """One node turned down for one pod.

    Attributes:
        code: whether preemption could help.
        reason: the stable reason name, used for metrics.
        message: the sentence kube-scheduler shows the user.
    """

    code: Code
    reason: Reason
    message: str


def unknown_node() -> Rejection:
    """The node is not (yet) in phalanx's cache, e.g. created a moment ago."""
    return Rejection(
        Code.UNRESOLVABLE,
        Reason.UNKNOWN_NODE,
        "node(s) not yet known to phalanx (its node cache has not seen them)",
    )


def not_ready() -> Rejection:
    """The node's ``Ready`` condition is ``False`` or ``Unknown``: pods placed there would not start.

    Unresolvable: evicting its pods frees nothing a pod could use until the node is healthy again.
    """
    return Rejection(
        Code.UNRESOLVABLE,
        Reason.NOT_READY,
        "node(s) not Ready (the kubelet stopped reporting or reports the node unhealthy)",
    )


def cordoned() -> Rejection:
    """The node is cordoned (``spec.unschedulable``): an admin is draining it, nothing new goes there."""
    return Rejection(
        Code.UNRESOLVABLE,
        Reason.CORDONED,
        "node(s) cordoned (spec.unschedulable: an admin keeps new pods off)",
    )


def too_few_gpus(total: int, needed: int) -> Rejection:
    """The node has fewer GPUs in all than the pod asks for; no eviction can fix that."""
    return Rejection(
        Code.UNRESOLVABLE,
        Reason.TOO_FEW_GPUS,
        f"node(s) with only {total} GPUs in total (pod needs {needed} on one node)",
    )


def too_few_free_gpus(free: int, needed: int) -> Rejection:
    """The node could hold the pod, but other pods hold too many of its GPUs now."""
    return Rejection(
        Code.UNSCHEDULABLE,
        Reason.TOO_FEW_FREE_GPUS,
        f"node(s) with too few free GPUs ({free} free, pod needs {needed})",
    )


def unreadable_topology() -> Rejection:
    """The node's GPU topology annotation is present but unreadable, so its GPU indices are not trusted."""
    return Rejection(
        Code.UNRESOLVABLE,
        Reason.UNREADABLE_TOPOLOGY,
        "node(s) whose GPU topology annotation phalanx.io/gpu-topology is unreadable (see the phalanx log)",
    )


def gpus_refused(most: int) -> Rejection:
    """The node advertises more GPUs than phalanx models (``Node.gpu_problem``): nothing goes there."""
    return Rejection(
        Code.UNRESOLVABLE,
        Reason.GPUS_REFUSED,
        f"node(s) advertising more nvidia.com/gpu than phalanx models ({most} per node; see its events)",
    )


def reserved(what: str) -> Rejection:
    """The node's free capacity is promised to pods being placed: a gang's reservation or a bind."""
    return Rejection(
        Code.UNRESOLVABLE,
        Reason.RESERVED,
        f"node(s) whose free {what} are reserved for pods being placed (a gang or a bind in progress)",
    )


def untolerated_taint(taint: str) -> Rejection:
    """The node has a ``NoSchedule`` or ``NoExecute`` taint the pod does not tolerate.

    kube-scheduler's TaintToleration filter turns such a node down before phalanx is asked.
    """
    return Rejection(Code.UNRESOLVABLE, Reason.TAINT, f"node(s) with taint {taint} the pod does not tolerate")


def node_selector_mismatch(selector: str) -> Rejection:
    """The node lacks a label of the pod's ``nodeSelector`` (kube-scheduler's NodeAffinity filter)."""
    return Rejection(
        Code.UNRESOLVABLE, Reason.NODE_SELECTOR, f"node(s) not matching the pod's node selector {selector}"
    )


def node_affinity_mismatch(terms: str) -> Rejection:
    """The node matches none of the terms of the pod's required node affinity."""
    return Rejection(
        Code.UNRESOLVABLE,
        Reason.NODE_AFFINITY,
        f"node(s) not matching the pod's required node affinity ({terms})",
    )


def insufficient(what: str, requested: str) -> Rejection:
    """The node's free CPU or memory is less than the pod requests (kube-scheduler's NodeResourcesFit)."""
    return Rejection(
        Code.UNSCHEDULABLE,
        Reason.INSUFFICIENT,
        f"node(s) with too little free {what} (pod requests {requested})",
    )


def gang_waiting(message: str) -> Rejection:
    """The pod's gang cannot be placed now; ``message`` says what it waits for (same on every node)."""
    return Rejection(Code.UNRESOLVABLE, Reason.GANG_WAITING, message)


def queue_hold(message: str) -> Rejection:
    """The pod's queue may not start it now; ``message`` names the queue and the rule."""
    return Rejection(Code.UNRESOLVABLE, Reason.QUEUE_HOLD, message)


class Verdict(enum.Enum):
    """What a group's filter decision amounts to; the value is the Kubernetes event reason."""

    QUEUE_HOLD = "QueueHold"
    GANG_WAITING = "GangWaiting"
    GANG_RESERVED = "GangReserved"


@dataclass(frozen=True, slots=True)
class GroupVerdict:
    """A decision about a whole group, typed, so no caller matches words in the message.

    Attributes:
        verdict: what the decision amounts to.
        message: the sentence the group's events and its pods' ``FailedScheduling`` events show.
    """

    verdict: Verdict
    message: str

    @property
    def event_type(self) -> str:
        """``Normal`` when the group got its place, else ``Warning``."""
        return "Normal" if self.verdict is Verdict.GANG_RESERVED else "Warning"

    def rejection(self) -> Rejection:
        """The rejection every node not chosen gets for this verdict."""
        if self.verdict is Verdict.QUEUE_HOLD:
            return queue_hold(self.message)
        return gang_waiting(self.message)


def sentence_rule(sentence: str) -> str:
    """A sentence with its figures masked: two sentences of one rule compare equal as facts move.

    A group told "waiting for members: 1 of 4 pods exist" need not hear "2 of 4" at once, but must hear
    "needs 32 GPUs ..." as soon as that is the reason: the rule changed.

    >>> sentence_rule("gang ml/g: waiting for members: 1 of 4 pods exist")
    'gang ml/g: waiting for members: # of # pods exist'
    """
    return _FIGURES.sub("#", sentence)
