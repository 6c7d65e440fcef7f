"""Elastic MPI pass: keep the pool's pin taints, size and move elastic MPIJobs, pin their waiting workers.

Every decision is the core's (``scheduling.elastic.decide.decide_elastic``, the function the simulator
calls too); this pass reads, asks and applies:

1. **Pool taints.** Nodes labelled ``phalanx.io/elastic-pool=true`` carry the taint
   ``phalanx.io/hostname=<node>:NoSchedule``; a node that loses the label loses the taint. Pods that are
   not pinned workers keep off pool nodes unless they tolerate ``phalanx.io/hostname`` (``Exists``),
   which waiting phalanx pods that are no managed workers get (``placement.elastic_pool``).
2. **Declarations.** An MPIJob with the annotation ``phalanx.io/max-workers`` is elastic; one whose
   declaration cannot be honoured (an annotation that is no whole number, workers that ask for no GPU,
   a minimum the cluster cannot hold, a job phalanx cannot read) gets a Warning event saying why (once
   per job and reason) and is left alone, and every other job is planned as if it were not there. A
   maximum above what the cluster could ever hold, or above ``MAX_ELASTIC_WORKERS``, is capped, with a
   ``MaxWorkersCapped`` event.
3. **Learn**: each job's throughput report (``kubeio.progress``: the annotation ``phalanx.io/throughput``
   its reporting process writes on the pod it runs in) becomes a sample of the size and spread it runs
   at; the samples are kept on the MPIJob (``phalanx.io/throughput-samples``) and a model is fitted on them
   (``scheduling.elastic.throughput``; ``placement.elastic_learning``). A job that reports nothing is
   sized by the prior. Each job's attained service (GPU-seconds so far, ``scheduling.elastic.attained``)
   is counted on from the record kept on the MPIJob (``phalanx.io/attained-gpu-seconds``) and rewritten
   in every write to the job.
4. **Plan** from the snapshot: the pool is the free GPUs plus what elastic workers hold, less what other
   waiting groups need; queue deficits from the queue view; sizes by each job's learned gain.
   If planning raises, the round is decided without the job whose absence lets it be
   (``scheduling.elastic.quarantine``): that job keeps its workers, gets a Warning event
   ``ElasticPlanFailed`` saying why (once per job and message; the traceback goes to the log), and
   every other job is planned as usual, so one job's fault never stalls the others' resizes or a
   waiting gang's room.
5. **Apply**: one merge patch per job with what changed: the plan (annotation
   ``phalanx.io/elastic-plan``, with the size, so that the admission webhook (``placement.webhook``)
   pins the workers the resize makes the operator create), ``Worker.replicas`` and the samples (each
   write wakes the job's MPI Operator, which backs off exponentially per wake-up until a sync succeeds,
   and a write landing during its sync fails that sync); move (delete the worker; its operator
   re-creates it), then pin every waiting worker still unpinned to a node its job's layout has room for
   (``scheduling.elastic.pinning``), and delete each waiting worker pinned by an older plan where the
   current one has no place for it (a pin cannot be taken off; its operator re-creates it, pinned anew).
   Each action gets an event on the MPIJob with the plan's reason; a resize's names the model's figures
   and the job's attained service (with the weight it gives its claim on more workers).

A job resized for waiting work keeps that size while the work waits (``scheduling.elastic.size_hold``: decide
the target once, move once); the pass carries each decision's holds to the next, in memory only.

Crash safety: nothing is remembered that the API server does not hold, but the holds (a restarted
manager starts with none: at most one more resize per job). Sizes are set, not added;
pins live in the pods' tolerations and a repeated pin writes nothing; a moved worker's replacement is
a waiting worker, pinned by the webhook or the next pass from the layout recomputed then; the time of a
job's last move is written on the MPIJob (``phalanx.io/elastic-moved-at``, wall clock) before the worker
is deleted, so the cooldown holds across a restart.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from kubeio.errors import KubeError
from kubeio.events import ObjectRef
from kubeio.mpijobs import MpiJob, elastic_job, mpijob_ref, render_plan
from kubeio.ports import EventSink, MpiJobSource, PodDeleter
from kubeio.render import pod_ref
from placement.elastic_learning import learn
from placement.elastic_pool import Pinner, keep_taints, open_pool
from placement.plan_applier import apply_migrations
from placement.round import Round
from scheduling.cluster.snapshot import ClusterSnapshot
from scheduling.elastic import ElasticJob, ElasticSettings, JobError, Layout
from scheduling.elastic.attained import attained
from scheduling.elastic.claim import describe_claim
from scheduling.elastic.decide import ElasticDecision, ElasticRound, decide_elastic, may_shrink
from scheduling.elastic.elastic_planner import COMPACT_NOTE
from scheduling.elastic.operator_lag import WriteTurn, write_turn
from scheduling.elastic.quarantine import Decide, decide_quarantining, describe_fault
from scheduling.elastic.size_hold import SizeHold
from scheduling.elastic.throughput import PRIOR
from scheduling.model import Pod
from scheduling.plan import Migration, Plan
from scheduling.queues import QueueError
from scheduling.queues.view import QueueView
from scheduling.topology import TopologyCache

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ElasticReport:
    """What one pass did."""

    tainted: tuple[str, ...] = ()
    opened: tuple[str, ...] = ()
    resized: tuple[str, ...] = ()
    moved: tuple[str, ...] = ()
    pinned: tuple[str, ...] = ()
    repinned: tuple[str, ...] = ()
    refused: tuple[str, ...] = ()
    grown: int = 0
    waiting: int = 0
    above_minimum: frozenset[str] | None = frozenset()
    """Elastic jobs (their PodGroups' keys) holding more than their minimum: they give room back by
    shrinking, so reclaim leaves them out (``placement.round``); ``None`` when MPIJobs were not listed."""
    giving_back: tuple[str, ...] = ()
    """Elastic jobs shrinking now (shrunk by this pass, or with more workers holding GPUs than their
    declared size): reclaim waits for the room they free before it evicts anyone."""
    replacing: tuple[str, ...] = ()
    """Elastic jobs (their PodGroups' keys) this pass deleted workers of, for their operator to re-create
    (moved, or re-pinned while waiting): short of ``minMember`` until then, not stale
    (``placement.round``)."""
    quarantined: tuple[str, ...] = ()
    """Elastic jobs this pass was decided without, because planning them raised
    (``scheduling.elastic.quarantine``)."""


class ElasticPass:
    """One elastic pass at a time (see the module docstring)."""

    def __init__(
        self,
        jobs: MpiJobSource,
        pins: Pinner,
        deleter: PodDeleter,
        events: EventSink,
        *,
        clock: Callable[[], float],
        topologies: TopologyCache,
        settings: ElasticSettings | None = None,
        decide: Decide = decide_elastic,
    ) -> None:
        self._jobs = jobs
        self._decide = decide
        self._pins = pins
        self._deleter = deleter
        self._events = events
        self._clock = clock
        self._topologies = topologies
        self._settings = settings or ElasticSettings()
        self._last_moved: dict[str, float] = {}
        self._told: set[tuple[str, str]] = set()
        self._lagging: dict[str, float] = {}  # job -> when its operator was first seen behind its pods
        self._stalled: set[str] = set()  # jobs told their operator lags (told again after it caught up)
        self._holds: Mapping[
            str, SizeHold
        ] = {}  # the last decision's, for the next (``scheduling.elastic.size_hold``)

    def run(self, facts: Round) -> ElasticReport:
        """Run one pass over the round's snapshot, queue view and MPIJobs."""
        snapshot, view = facts.snapshot, facts.view
        tainted = keep_taints(self._pins, snapshot)
        if facts.mpijobs is None:  # not listed this round (``placement.round.RoundReader``)
            return ElasticReport(tainted, above_minimum=None)
        declared = {job.key: job for job in facts.mpijobs if job.elastic}
        pods = snapshot.all_pods() if declared or any(n.pin_taint for n in snapshot.nodes.values()) else []
        jobs, refused = self._elastic(declared.values(), snapshot, pods, view)
        opened = open_pool(self._pins, snapshot, pods, {p.uid for job in jobs for p in job.workers})
        above = frozenset(may_shrink(jobs))
        if not jobs:
            return ElasticReport(tainted, opened, refused=refused, above_minimum=above)
        models, learned = learn(declared, jobs, snapshot, pods, self._tell)
        counted = self._clock()
        served = {job.key: attained(declared[job.key].attained, job.workers, counted) for job in jobs}
        served_seconds = {key: record.gpu_seconds for key, record in served.items()}
        contained = decide_quarantining(
            ElasticRound(
                jobs,
                snapshot,
                view,
                self._clock(),
                _last_moved(declared.values(), self._last_moved),
                self._settings,
                self._topologies,
                models,
                attained=served_seconds,
                holds=self._holds,
            ),
            self._decide,
        )
        self._tell_faults(declared, contained.faults)
        decision = contained.decision
        self._holds = decision.holds
        plan, layout = decision.plan, decision.layout
        self._tell_held(declared, layout, plan)
        plans = _changed_plans(declared, layout, plan)
        sizes = {resize.job: resize for resize in plan.resizes}
        now = self._clock()
        turns = {job.key: write_turn(job.operator, self._lagging.get(job.key), now) for job in jobs}
        self._lagging = {key: turn.lagging_since for key, turn in turns.items() if turn.lagging_since}
        self._tell_stalls(declared, turns)
        resized: list[str] = []
        grown = 0
        job_of = {p.uid: job.key for job in jobs for p in job.workers}
        moving = {job_of[move.uid] for move in plan.migrations}
        written: set[str] = set()
        for key in sorted(plans.keys() | sizes.keys() | learned.keys() | moving):
            if not self._may_write(key, turns):
                continue
            job, resize = declared[key], sizes.get(key)
            if resize is not None:
                # The event is written before the action (``EventRecorder.record_now``): a crash right
                # after the action then cannot lose it; one before it leaves the action to the next pass.
                model = models.get(key, PRIOR)
                figures = model.describe(resize.after, max(1, layout.nodes_of(key)))
                service = describe_claim(key, jobs, served_seconds, self._settings)
                message = f"{resize.reason}; {figures}; {service}"
                self._events.record_now(mpijob_ref(job), "Normal", "Resized", message)
            # Size, plan (the webhook pins new workers by it), samples, move time and attained service:
            # one write, before any worker is deleted, so a restart in between still knows when the
            # cooldown started and what the deleted workers had run.
            try:
                self._jobs.update(
                    job.namespace,
                    job.name,
                    replicas=resize.after if resize is not None else None,
                    plan=plans.get(key),
                    samples=learned.get(key),
                    moved_at=self._clock() if key in moving else None,
                    attained=served[key],
                )
            except KubeError as exc:
                log.warning("%s: not written (%s); next pass tries again", key, exc)
                continue
            written.add(key)
            if resize is not None:
                resized.append(key)
                grown += resize.after > resize.before
        moved: list[str] = []
        moved_jobs: set[str] = set()
        recorded = [m for m in plan.migrations if job_of[m.uid] in written]  # else: not moving this pass

        def about(move: Migration) -> ObjectRef:
            return mpijob_ref(declared[job_of[move.uid]])

        for move in apply_migrations(recorded, self._events, self._deleter, about=about):
            self._last_moved[job_of[move.uid]] = self._clock()
            moved.append(move.pod)
            moved_jobs.add(job_of[move.uid])
        pinned = self._pin_waiting(decision)
        repinned, repinned_jobs = self._repin_stale(decision, declared)
        replacing = tuple(sorted(moved_jobs | repinned_jobs))
        waiting = sum(1 for job in jobs for p in job.workers if p.node_name is None and not p.terminating)
        return ElasticReport(
            tainted,
            opened,
            tuple(resized),
            tuple(moved),
            tuple(pinned),
            repinned,
            refused,
            grown,
            waiting,
            decision.shrinking,
            _giving_back(jobs, {r.job for r in plan.resizes if r.after < r.before} & set(resized)),
            replacing,
            tuple(sorted(contained.faults)),
        )

    def _tell_faults(self, declared: Mapping[str, MpiJob], faults: Mapping[str, Exception]) -> None:
        """A Warning on each job the round was decided without, and its traceback in the log, once each."""
        for key, fault in sorted(faults.items()):
            job = declared[key]
            message = describe_fault(key, job.replicas, fault)
            if (job.uid, message) not in self._told:
                log.error("%s: planned without it this round", key, exc_info=fault)
            self._tell(job, "Warning", "ElasticPlanFailed", message)

    def _tell_held(self, declared: Mapping[str, MpiJob], layout: Layout, plan: Plan) -> None:
        """A Normal event on each job the compact rule kept from growing at all, once per size.

        A job it held back only in part says so in its ``Resized`` event.
        """
        resized = {r.job for r in plan.resizes}
        for key in sorted(layout.held_compact - resized):
            job = declared[key]
            message = (
                f"MPIJob {key}: not grown beyond {job.replicas} worker{'s' if job.replicas != 1 else ''} "
                "though GPUs are free: "
                f"it grows {COMPACT_NOTE}; the free GPUs are on other nodes"
            )
            self._tell(job, "Normal", "GrowthHeld", message)

    def _tell_stalls(self, declared: Mapping[str, MpiJob], turns: Mapping[str, WriteTurn]) -> None:
        """A Warning on each job whose operator has lagged too long, once per lag (it may be stalled)."""
        self._stalled &= {key for key, turn in turns.items() if turn.lagging_since is not None}
        for key in sorted(k for k, turn in turns.items() if turn.overdue and k not in self._stalled):
            self._stalled.add(key)
            self._events.record(
                mpijob_ref(declared[key]), "Warning", "OperatorLagging", turns[key].stall_note
            )

    @staticmethod
    def _may_write(key: str, turns: Mapping[str, WriteTurn]) -> bool:
        """Whether this pass writes MPIJob ``key`` (``scheduling.elastic.operator_lag``); says why not."""
        turn = turns.get(key)
        if turn is None or (turn.write and not turn.reason):
            return True
        if turn.write:
            log.warning("%s: %s", key, turn.reason)
        else:
            log.info("%s: not written this pass: %s", key, turn.reason)
        return turn.write

    def _elastic(
        self,
        declared: Iterable[MpiJob],
        snapshot: ClusterSnapshot,
        pods: Sequence[Pod],
        view: QueueView | None,
    ) -> tuple[list[ElasticJob], tuple[str, ...]]:
        gpus = sum(n.gpu_total for n in snapshot.nodes.values() if n.takes_pods)
        jobs, refused = [], []
        for job in declared:  # each job on its own: one that cannot be sized never stops the others
            try:
                if job.problem is not None:
                    msg = f"MPIJob {job.key}: phalanx cannot read it: {job.problem}"
                    raise JobError(msg)
                elastic = elastic_job(job, pods, _queue_of(job, view), gpus)
            except (JobError, QueueError) as exc:
                refused.append(job.key)
                self._tell(job, "Warning", "InvalidElasticJob", str(exc))
                continue
            except Exception as exc:  # a fault in one job's content stays with that job
                log.exception("%s: refused, it could not be read", job.key)
                refused.append(job.key)
                self._tell(
                    job, "Warning", "InvalidElasticJob", f"MPIJob {job.key}: phalanx cannot read it: {exc}"
                )
                continue
            if elastic.capped is not None:
                self._tell(job, "Normal", "MaxWorkersCapped", elastic.capped)
            jobs.append(elastic)
        return jobs, tuple(refused)

    def _tell(self, job: MpiJob, kind: str, reason: str, message: str) -> None:
        """An event on the job, once per job and message (a pass runs every two seconds)."""
        if (job.uid, message) not in self._told:
            self._told.add((job.uid, message))
            self._events.record(mpijob_ref(job), kind, reason, message)

    def _pin_waiting(self, decision: ElasticDecision) -> list[str]:
        """Pin each waiting worker where the decision puts it."""
        pinned = []
        for key, pins in decision.pins.items():
            for pod, node in pins:
                try:
                    if not self._pins.pin_pod(pod.namespace, pod.name, pod.uid, node):
                        continue
                except KubeError as exc:
                    log.info("%s: pin to %s not written (%s); next pass tries again", pod.key, node, exc)
                    continue
                pinned.append(pod.key)
                self._events.record(
                    pod_ref(pod),
                    "Normal",
                    "Pinned",
                    f"pinned to {node}: the layout of {key} puts a worker there",
                )
        return pinned

    def _repin_stale(
        self, decision: ElasticDecision, declared: dict[str, MpiJob]
    ) -> tuple[tuple[str, ...], frozenset[str]]:
        """Delete each waiting worker pinned where the plan has no place for it now; it comes back pinned.

        Its operator re-creates it at once, and the webhook (or the next pass) pins the new pod by the
        current plan (the decision's ``stale_pins``). Nothing runs in it, so nothing is lost. Returns the
        pods deleted and their jobs.
        """
        repinned = []
        jobs: set[str] = set()
        for key, stale in decision.stale_pins.items():
            for pod, node in stale:
                old = ", ".join(sorted(pod.pinned))
                self._events.record_now(
                    mpijob_ref(declared[key]),
                    "Normal",
                    "Repinned",
                    f"deleted waiting {pod.name}, pinned to {old} where the plan of {key} has no place "
                    f"for it now; its operator re-creates it, to be pinned to {node}",
                )
                if not self._deleter.delete_pod(pod.namespace, pod.name, pod.uid):
                    continue
                repinned.append(pod.key)
                jobs.add(key)
        return tuple(repinned), frozenset(jobs)


def _changed_plans(declared: dict[str, MpiJob], layout: Layout, plan: Plan) -> dict[str, str]:
    """Each job's target (workers and nodes) as shown on it, where it changed."""
    sizes = {r.job: r.after for r in plan.resizes}
    plans = {}
    for key, nodes in layout.targets.items():
        job = declared[key]
        text = render_plan(sizes.get(key, job.replicas), dict(nodes))
        if text != job.plan:
            plans[key] = text
    return plans


def _last_moved(jobs: Iterable[MpiJob], remembered: dict[str, float]) -> dict[str, float]:
    """When each job was last moved: what this process did, else what the MPIJob says (after a restart)."""
    recorded = {job.key: job.moved_at for job in jobs if job.moved_at is not None}
    return {**recorded, **remembered}


def _queue_of(job: MpiJob, view: QueueView | None) -> str:
    if view is None:
        return job.queue or "default"
    return view.tree.workload_queue(job.queue)


def _giving_back(jobs: Sequence[ElasticJob], shrunk: set[str]) -> tuple[str, ...]:
    """The jobs that free GPUs now.

    Those shrunk this pass, and those with a worker terminating or more workers holding GPUs than
    their declared size (their operator is bringing them down).
    """
    back = set(shrunk)
    for job in jobs:
        holding = [p for p in job.workers if p.node_name is not None and p.holds_resources]
        if any(p.terminating for p in holding) or len(holding) > job.size:
            back.add(job.key)
    return tuple(sorted(back))
