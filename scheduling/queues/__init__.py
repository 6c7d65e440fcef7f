"""Queues and fair share, in the pure core: who deserves what, who goes first, who gives room back.

- ``model``: ``Queue``, ``QueueTree`` (validated hierarchy, only leaves hold workloads), ``DEFAULT_QUEUE``.
- ``workloads``: ``PendingGroup``, ``RunningGang``, the preemptibility rule and the labels.
- ``fair_share``: quota first, then the unused rest by over-quota weight (water-filling), per level.
- ``usage``: optional time-decayed usage that moves the over-quota weights (KAI's time-based fairshare).
- ``drf``: dominant resource share.
- ``ordering``: ``QueueState`` and the order of pending groups; ``rules``: ``check_rules`` and its reasons.
- ``reclaim``: whole-gang evictions that give a starved queue its fair share back; ``victims``: the
  just-enough victim set.
- ``preemption``: kube-scheduler's victims narrowed to the preemptor's queue: a gang's surplus members
  alone, else gangs whole; ``surplus``: a gang's members above its ``minMember`` and its leader.
- ``view``: the queues' view of the cluster at one moment (what each holds, deserves and waits for),
  ``report`` one row per queue for the CLI; ``reclaim_pass`` one reclaim pass over the starved groups and
  ``reclaim_fit`` its node-level check. These read the cluster's snapshot, so the package's own
  ``__init__`` does not import them: import them by their module.

Like the rest of ``scheduling``, nothing here reads a clock, the environment or a random source: ``now``,
half-lives and usage are arguments.
"""

from scheduling.queues.drf import dominant_resource, dominant_share, resource_shares
from scheduling.queues.fair_share import Claim, FairShares, QueueShare, Split, divide, fair_shares
from scheduling.queues.ordering import QueueState, Standing, order_pending, queue_states, standing
from scheduling.queues.preemption import (
    GangMember,
    PreemptionDecision,
    Preemptor,
    PreemptRule,
    VictimPod,
    preempt_within_queue,
)
from scheduling.queues.queue_tree import (
    DEFAULT_QUEUE,
    Queue,
    QueueError,
    QueueTree,
    ResourceQuota,
    default_queue,
)
from scheduling.queues.recent_usage import UsageSample, UsageWeighting, decayed_usage, normalized_usage
from scheduling.queues.reclaim import ReclaimChoice, ReclaimOutcome, Victim, choose_reclaim, choose_reclaims
from scheduling.queues.rules import QueueRule, RuleCheck, check_rules
from scheduling.queues.surplus import GangSize, is_leader
from scheduling.queues.victims import Fits, VictimSearch, check_victims, choose_victims
from scheduling.queues.workloads import (
    NON_PREEMPTIBLE_PRIORITY,
    PREEMPTIBLE_LABEL,
    QUEUE_LABEL,
    PendingGroup,
    RunningGang,
    is_preemptible,
)

__all__ = [
    "DEFAULT_QUEUE",
    "NON_PREEMPTIBLE_PRIORITY",
    "PREEMPTIBLE_LABEL",
    "QUEUE_LABEL",
    "Claim",
    "FairShares",
    "Fits",
    "GangMember",
    "GangSize",
    "PendingGroup",
    "PreemptRule",
    "PreemptionDecision",
    "Preemptor",
    "Queue",
    "QueueError",
    "QueueRule",
    "QueueShare",
    "QueueState",
    "QueueTree",
    "ReclaimChoice",
    "ReclaimOutcome",
    "ResourceQuota",
    "RuleCheck",
    "RunningGang",
    "Split",
    "Standing",
    "UsageSample",
    "UsageWeighting",
    "Victim",
    "VictimPod",
    "VictimSearch",
    "check_rules",
    "check_victims",
    "choose_reclaim",
    "choose_reclaims",
    "choose_victims",
    "decayed_usage",
    "default_queue",
    "divide",
    "dominant_resource",
    "dominant_share",
    "fair_shares",
    "is_leader",
    "is_preemptible",
    "normalized_usage",
    "order_pending",
    "preempt_within_queue",
    "queue_states",
    "resource_shares",
    "standing",
]
