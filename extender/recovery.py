"""Complete or roll back a gang that a crashed extender left half-bound, from its plan annotation.

What to do with each member is the core's (``scheduling.gang.recovery.plan_recovery``): bind the planned
members that are still unbound, or delete the bound ones when a planned member is gone or the plan no
longer holds (its node left, its GPUs are held by others). This module reads the PodGroups, reads each
such gang's members from the API server (the cache holds live pods only, and a member that finished
after its Binding still counts as bound) and asks it whether the nodes still to bind onto exist,
decides and promises the GPUs it will bind in one ledger update (no concurrent bind can take them in
between), performs the writes, removes the annotation and tells the users: a gang completed or rolled
back gets an event (one found bound whole, which is also how a gang bound the normal way looks for a
moment, does not).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from extender.barrier import BarrierBoard
from extender.gang_bind import GangTeller, PodBinding
from extender.ledger import PromiseLedger
from kubeio.errors import KubeError
from kubeio.ports import RecoveryWriter
from kubeio.render import gpu_annotations
from scheduling.cluster.promises import PromiseBook
from scheduling.cluster.snapshot import ClusterSnapshot
from scheduling.gang.record import PlanError, decode_plan
from scheduling.gang.recovery import Recovery, RecoveryFacts, RecoveryKind, hold_plan, plan_recovery
from scheduling.model import Pod, PodGroup
from scheduling.plan import Plan

log = logging.getLogger(__name__)


class GangRecovery:
    """The recovery pass, run once before serving and then every few seconds."""

    def __init__(
        self,
        snapshot: Callable[[], ClusterSnapshot],
        ledger: PromiseLedger,
        writer: RecoveryWriter,
        bind: PodBinding,
        *,
        board: BarrierBoard,
        teller: GangTeller,
        node_gone: Callable[[str], str],
        clock: Callable[[], float],
        hold_seconds: float,
    ) -> None:
        self._snapshot = snapshot
        self._node_gone = node_gone
        self._clock = clock
        self._hold_seconds = hold_seconds
        self._ledger = ledger
        self._writer = writer
        self._bind = bind
        self._board = board
        self._teller = teller

    def recover_all(self) -> int:
        """Complete or roll back every gang left with a plan annotation; return how many were handled."""
        handled = 0
        snapshot = self._snapshot()
        for group in snapshot.podgroups():
            if group.plan is None or self._board.active(group.key):
                continue
            handled += 1
            self.recover(group)
        return handled

    def recover(self, group: PodGroup) -> None:
        """Finish one gang from its plan annotation (see ``scheduling.gang.record``)."""
        try:
            plan = decode_plan(group.plan or "", group.namespace)
        except PlanError as exc:
            log.warning("gang %s: %s; removing it", group.key, exc)
            self._writer.set_plan(group.namespace, group.name, None)
            self._ledger.release_group(group.key)
            return
        try:
            members = self._writer.list_members(group.namespace, group.name)
        except KubeError as exc:
            log.warning("gang %s: its members could not be listed (%s); will try again", group.key, exc)
            return
        pods = {p.name: p for p in members}
        recovery = self._decide(group, plan, pods)
        log.debug(
            "gang %s recovery: plan %s, pods %s",
            group.key,
            [(a.pod, a.node) for a in plan.assignments],
            [(p.name, p.node_name, p.phase, p.terminating) for p in pods.values()],
        )
        rolled_back = recovery.kind is RecoveryKind.ROLLED_BACK
        if recovery.kind is not RecoveryKind.BOUND:
            # The event before the binds and deletions: a crash cannot lose it then. A gang found bound
            # whole has nothing to tell: the binder's own last step (removing the plan) can come after
            # this pass looked, so that is also how every gang bound in the normal way may look.
            self._teller.announce(
                group,
                "Warning" if rolled_back else "Normal",
                "GangRecovered",
                f"gang {group.key}: {recovery.reason}",
            )
        try:
            for member in recovery.bind:
                name = member.pod.partition("/")[2]
                self._bind(group.namespace, name, member.uid, member.node, gpu_annotations(member.gpus))
            for pod in recovery.delete:
                self._writer.delete_pod(pod.namespace, pod.name, pod.uid)
            self._writer.set_plan(group.namespace, group.name, None)
        except KubeError as exc:
            log.warning("gang %s: recovery step failed (%s); will try again", group.key, exc)
            return
        if recovery.kind is RecoveryKind.BOUND:
            log.debug("gang %s: %s; plan removed", group.key, recovery.reason)
        else:
            (log.warning if rolled_back else log.info)("gang %s recovered: %s", group.key, recovery.reason)
        if self._teller.metrics is not None:
            self._teller.metrics.recoveries.labels(recovery.kind.value).inc()
        bound = {a.uid for a in recovery.bind}  # their promises end when the cache shows them bound
        for member in plan.assignments:
            if member.uid not in bound:
                self._ledger.release(member.uid)

    def _decide(self, group: PodGroup, plan: Plan, pods: dict[str, Pod]) -> Recovery:
        """The core's decision and, when it completes the gang, its promises, in one ledger update."""
        unbound = {p.name for p in pods.values() if p.node_name is None}
        snapshot = self._snapshot()
        # Only nodes the cache knows are asked about: an unknown node breaks the plan anyway.
        nodes = sorted(
            {a.node for a in plan.assignments if a.pod.partition("/")[2] in unbound} & snapshot.nodes.keys()
        )
        absent = {node: why for node in nodes if (why := self._node_gone(node))}
        until = self._clock() + self._hold_seconds

        def change(book: PromiseBook) -> tuple[PromiseBook, Recovery]:
            recovery = plan_recovery(plan, pods, RecoveryFacts(snapshot, book, absent))
            return book.add_all(hold_plan(recovery, pods, group.key, until)), recovery

        return self._ledger.update(change)

    def run(
        self, stop: threading.Event, interval: float, *, on_duty: Callable[[], bool] = lambda: True
    ) -> None:
        """Run ``recover_all`` every ``interval`` seconds while ``on_duty`` (``extender.duty``).

        Off duty (beside a standby kube-scheduler) it does nothing: the gangs with a plan it sees are the
        ones the leader's extender is binding.
        """
        while not stop.wait(interval):
            if not on_duty():
                continue
            try:
                self.recover_all()
            except Exception:  # the loop must outlive any one bad gang
                log.exception("gang recovery pass failed")
