"""The faults of ``hack/soak --faults``: leaders killed, nodes lost, a Queue broken, on a fixed timetable.

A cluster that runs for weeks sees its leaders die, its nodes go and come back, and its admins make
mistakes. With ``--faults`` the soak runs what the manifests ship for high availability (two
kube-scheduler + extender pairs, two placement manager replicas that both serve the webhooks behind one
address, ``Testbed(placement_replicas=2)``) and, while the workload goes on, on this timetable:

- every ``kill_every`` minutes, a SIGKILL of the placement manager's leader (the replica whose
  ``phalanx_placement_leader`` is 1), and half a period later of the scheduling leader (the
  kube-scheduler whose extender answered filter calls in the last seconds, with that extender, as its Pod
  would die whole); each killed process is started again 5 s later, as the kubelet restarts a container;
- every ``node_every`` minutes, a node deleted (its pods are then the pod garbage collector's to delete)
  and registered again two minutes later;
- at ``bad_queue_at`` minutes a Queue whose parent does not exist, fixed five minutes later.

Each fault runs on its own thread, so the workload never waits for a restart, and is written to the
timeline with the minute it happened and what it did.
"""

from __future__ import annotations

import random
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from localbed import PLACEMENT_REPLICAS, Testbed
from soak_ledger import filter_calls, leads
from workload import QUEUES, create_queue, list_pods, queue

from kubeio.http import JsonObject
from testbed.nodes import SimNodeSpec

RESTART_AFTER = 5.0
"""Seconds from a kill to the restart of what was killed."""

NODE_AWAY = 120.0
"""Seconds a deleted node stays away."""

QUEUE_BROKEN_FOR = 300.0
"""Seconds the broken Queue stays broken."""


@dataclass(frozen=True, slots=True)
class FaultPlan:
    """When the faults come, in minutes from the start (``0`` turns one off)."""

    kill_every: float = 15.0
    node_every: float = 10.0
    bad_queue_at: float = 20.0


@dataclass
class Faults:
    """Runs the timetable against a test bed and keeps the timeline and the pods a fault took."""

    bed: Testbed
    nodes: list[SimNodeSpec]
    namespace: str
    plan: FaultPlan
    rng: random.Random
    started: float = field(default_factory=time.monotonic)
    timeline: list[str] = field(default_factory=list)
    on_lost_node: set[str] = field(default_factory=set)
    """Names of the pods that were on a node when it was deleted: the pod garbage collector's."""
    bound_after_delete: set[str] = field(default_factory=set)
    """Names of the pods bound to a node after the API server answered its deletion: Bindings the API
    server takes to a node it no longer has (it does not check), which phalanx must not send."""
    _away: dict[str, set[str]] = field(default_factory=dict)
    """Each node deleted and not yet back, with the pods that were bound to it when it was deleted."""
    _due: list[tuple[float, str, Callable[[], None]]] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        due = []
        if self.plan.kill_every:
            period = self.plan.kill_every * 60
            due += [(period * k, "placement leader", self._kill_placement) for k in range(1, 10_000)]
            due += [
                (period * k + period / 2, "scheduling leader", self._kill_scheduler) for k in range(1, 10_000)
            ]
        if self.plan.node_every:
            period = self.plan.node_every * 60
            due += [(period * k - period / 2, "node", self._lose_node) for k in range(1, 10_000)]
        if self.plan.bad_queue_at:
            due.append((self.plan.bad_queue_at * 60, "queue", self._break_queue))
        self._due = sorted(due, key=lambda d: d[0])

    def tick(self) -> None:
        """Start, each on its own thread, the faults that are due now."""
        now = time.monotonic() - self.started
        while self._due and self._due[0][0] <= now:
            _, name, fault = self._due.pop(0)
            threading.Thread(target=self._run, args=(name, fault), name=f"fault-{name}", daemon=True).start()

    def _run(self, name: str, fault: Callable[[], None]) -> None:
        try:
            fault()
        except Exception as exc:  # a fault that fails is part of the timeline, not the end of the soak
            self._say(f"{name} fault FAILED: {exc!r}")

    def _say(self, text: str) -> None:
        line = f"[{(time.monotonic() - self.started) / 60:5.1f} min] FAULT {text}"
        with self._lock:
            self.timeline.append(line)
        print(line, flush=True)

    def _kill_placement(self) -> None:
        leader = next((n for n in PLACEMENT_REPLICAS if leads(self.bed, n)), None)
        if leader is None:
            self._say("placement: no replica leads right now; nothing killed")
            return
        pid = self.bed.pid(leader)
        self.bed.kill(leader, signal.SIGKILL)
        self._say(f"SIGKILL of the placement manager's leader {leader} (pid {pid})")
        time.sleep(RESTART_AFTER)
        self.bed.start_placement(leader, webhook=self.bed.pin_webhook)
        successor = next((n for n in PLACEMENT_REPLICAS if leads(self.bed, n)), "none yet")
        self._say(f"{leader} started again (pid {self.bed.pid(leader)}); the leader now is {successor}")

    def note(self, pods: list[JsonObject]) -> None:
        """Note, from the soak's look of this second, the pods bound to a node that is away now.

        The pod garbage collector deletes such a pod within about a minute, long before the node comes
        back, so a look only when it does would miss a pod bound there just after the deletion.
        """
        with self._lock:
            for pod in pods:
                node = pod["spec"].get("nodeName")
                if node in self._away:
                    name = pod["metadata"]["name"]
                    self.on_lost_node.add(name)
                    if name not in self._away[node]:
                        self.bound_after_delete.add(name)

    def _kill_scheduler(self) -> None:
        pairs = {"a": ("kube-scheduler-a", "extender", self.bed.extender_url),
                 "b": ("kube-scheduler-b", "extender-b", self.bed.extender_b_url)}  # fmt: skip
        before = {k: filter_calls(url) for k, (_, _, url) in pairs.items()}
        time.sleep(3)
        grew = [k for k, (_, _, url) in pairs.items() if filter_calls(url) > before[k]]
        if len(grew) != 1:
            self._say(f"scheduling: no single pair answered filter calls ({grew}); nothing killed")
            return
        scheduler, extender, url = pairs[grew[0]]
        self.bed.kill(scheduler, signal.SIGKILL)
        self.bed.kill(extender, signal.SIGKILL)
        self._say(f"SIGKILL of the scheduling leader {scheduler} and its {extender}")
        time.sleep(RESTART_AFTER)
        port = int(url.rsplit(":", 1)[1])
        self.bed.start_extender(name=extender, port=port)
        self.bed.start_scheduler(scheduler, url)
        self._say(f"{scheduler} and {extender} started again (a standby now)")

    def _lose_node(self) -> None:
        spec = self.rng.choice(self.nodes)
        on_it = {
            p["metadata"]["name"]
            for p in list_pods(self.bed.http, self.namespace)
            if p["spec"].get("nodeName") == spec.name
        }
        self.bed.http.request("DELETE", f"/api/v1/nodes/{spec.name}")
        at_delete = {
            p["metadata"]["name"]
            for p in list_pods(self.bed.http, self.namespace)
            if p["spec"].get("nodeName") == spec.name
        }
        with self._lock:
            self.on_lost_node |= on_it | at_delete
            self._away[spec.name] = on_it | at_delete
        self._say(f"node {spec.name} deleted with {len(on_it)} of the soak's pods on it")
        time.sleep(NODE_AWAY)
        late = {
            p["metadata"]["name"]
            for p in list_pods(self.bed.http, self.namespace)
            if p["spec"].get("nodeName") == spec.name
        }
        with self._lock:
            self.on_lost_node |= late  # bound to it just before the delete reached every cache
            self.bound_after_delete |= late - at_delete
            del self._away[spec.name]
        self.bed.add_nodes([spec])
        self._say(f"node {spec.name} registered again")

    def _break_queue(self) -> None:
        body = queue("team-d", quota=8, weight=1)
        body["spec"]["parent"] = "no-such-department"
        create_queue(self.bed.http, body)
        self._say("Queue team-d created with parent no-such-department (invalid)")
        time.sleep(QUEUE_BROKEN_FOR)
        patch = {"spec": {"parent": None}}
        self.bed.http.request(
            "PATCH", f"{QUEUES}/team-d", body=patch, content_type="application/merge-patch+json"
        )
        self._say("Queue team-d fixed (no parent)")
