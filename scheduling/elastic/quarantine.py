"""A fault in one elastic job's planning stays with that job: the round goes on without it.

The elastic round decides every job at once (``decide``), so an exception anywhere in it used to fail
the whole pass, on every round, for as long as the state that raised it lasted: no job resized, no
worker pinned, and a gang waiting for room that elastic jobs had to give back waited for ever. That
was seen on the test bed (``docs/design/elastic-mpi.md``, "A fault stays with its job"): one job's
workers sat on the very GPUs a waiting gang's plan named, and every round raised.

``decide_quarantining`` contains such a fault:

1. it decides the round as it is; if that succeeds, there is nothing to contain;
2. else it decides the round without each job in turn (jobs by key), and the first job whose absence
   lets the round be decided is *quarantined*: the decision is the round without it;
3. else (no single job's absence helps) every job is quarantined and the round is decided with none:
   the pool's taints, pins and reclaim still run; if even that raises, the fault is not a job's and
   the exception goes to the caller.

A quarantined job is, for this round, what a rigid gang is: its workers keep their nodes and GPUs
(they count as other pods' GPUs, not as room), it is not resized or moved, and it is not among the
jobs reclaim lets shrink (``ElasticDecision.may_shrink``), so reclaim may take its GPUs back whole
rather than wait for a shrink that is not coming. The next round tries it again from the start, so a
fault that the cluster's state caused ends when that state does.

Finding the job costs one decision per job, only in a round that raised (a round without a fault
costs nothing more); the driver says why on the job (a Warning event) and logs the traceback. The
simulator calls ``decide_elastic`` itself: a replay stops at a fault, with its traceback, rather than
report figures of a round decided without a job.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType

from scheduling.elastic.decide import ElasticDecision, ElasticRound, decide_elastic

Decide = Callable[[ElasticRound], ElasticDecision]
"""The round's decision (``decide_elastic``); a parameter so a test can make it fail."""


@dataclass(frozen=True, slots=True)
class Contained:
    """A round's decision, and the jobs it was decided without.

    Attributes:
        decision: the decision of the round without the quarantined jobs.
        faults: per quarantined job (its key), the exception its round raised.
    """

    decision: ElasticDecision
    faults: Mapping[str, Exception] = field(default_factory=lambda: MappingProxyType({}))


def decide_quarantining(facts: ElasticRound, decide: Decide = decide_elastic) -> Contained:
    """Decide the round, quarantining the job whose planning raises (see the module docstring)."""
    try:
        return Contained(decide(facts))
    except Exception as exc:  # a fault in the core: contained below, and told by the driver
        fault = exc
    jobs = sorted(facts.jobs, key=lambda j: j.key)
    for job in jobs:
        others = [j for j in jobs if j.key != job.key]
        try:
            decision = decide(replace(facts, jobs=others))
        except Exception:  # not this job alone: try the next
            continue
        return Contained(decision, MappingProxyType({job.key: fault}))
    decision = decide(replace(facts, jobs=()))
    return Contained(decision, MappingProxyType({job.key: fault for job in jobs}))


def describe_fault(key: str, size: int, fault: Exception) -> str:
    """The Warning on a quarantined job: what raised, what it means for the job and for the others.

    >>> describe_fault("ml/a", 3, ValueError("no GPUs [0, 1] on n2")).split("; ")[0]
    'MPIJob ml/a: phalanx could not plan it this round (ValueError: no GPUs [0, 1] on n2)'
    """
    cause = f"{type(fault).__name__}: {fault}"
    if len(cause) > 300:  # an exception may echo a whole object: the event keeps its head
        cause = cause[:297] + "..."
    return (
        f"MPIJob {key}: phalanx could not plan it this round ({cause}); it keeps its {size} "
        f"worker{'s' if size != 1 else ''} where they run, is neither resized nor moved, and the other "
        "elastic jobs are planned without it until a round plans it again. This is a phalanx defect: "
        "the placement manager's log has the traceback"
    )
