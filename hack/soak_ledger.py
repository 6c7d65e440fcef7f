"""What the soak measures besides its per-minute report: GPUs used while pods wait, pods lost, memory.

- **GPUs allocated while pods wait.** Every second the soak lists its pods; when any waits gated, kept
  by the release pass (still gated ``KEPT_AFTER`` seconds after its creation: a pod released at once
  spends a fraction of a second gated, on its way), it samples the GPUs its bound pods hold over the
  GPUs of the nodes present. The mean of those samples is the figure the goal names (>= 95%); the mean
  over every second, waiting or not, is printed beside it. The placement leader's
  ``phalanx_admission_idle_gpus{rule}`` is sampled at the same moments, so the GPUs left idle are split by
  the rule that kept them (``scheduling.admission.outcome.KeptRule``).
- **Pods lost.** Every pod the soak creates must end in one of: running or waiting now, finished, deleted
  by the soak, on a node a fault deleted (the pod garbage collector's), or evicted by phalanx with an
  event (a stale gang or a reclaim, collected every minute, before the API server's one-hour event TTL
  takes them). Any other pod that vanished is lost.
- **Memory.** The resident size of each process of the product (the extender's worker, each placement
  replica, by pid: a restarted process starts again), sampled every minute. Its growth compares the
  peak of the first ``MEMORY_WINDOW`` after its first ten minutes with the peak of its last
  ``MEMORY_WINDOW``. Peaks, not two single samples: the placement manager collects its cyclic garbage
  once every ``kubeio.collector.FULL_EVERY`` seconds, so its size is a sawtooth of that period, and
  two single samples taken at a trough and at a peak read as growth when nothing grows. A window of one
  period holds one peak each; a leak raises every peak. A standby that starts serving (the placement
  replica that takes the Lease, the extender whose kube-scheduler takes over) starts its baseline
  again, as a restarted process does: taking over fills its caches and buffers with the traffic it
  serves from then on, which is no leak. Each process is listed with the role it was measured in.
"""

from __future__ import annotations

import os
import re
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from localbed import Testbed
from workload import metric_value, scrape

from kubeio.collector import FULL_EVERY
from kubeio.errors import KubeError
from kubeio.http import JsonObject
from scheduling.admission.outcome import KeptRule
from scheduling.timestamps import seconds

EVICTION_REASONS = frozenset({"GangEvicted", "Reclaimed", "Preempted"})
"""Event reasons of actions that delete pods: phalanx's (on the pod or its PodGroup), kube-scheduler's."""

KEPT_AFTER = 5.0
"""Seconds a pod stays gated before it counts as waiting: the release pass runs at least twice a second."""

MEMORY_AFTER = 600.0
"""Seconds a process runs before its memory is taken as the baseline."""

MEMORY_WINDOW = FULL_EVERY
"""Seconds of samples whose peak is compared: one period of the placement manager's full collections."""

IDLE_RULES = ("in_flight", *(rule.value for rule in KeptRule))


def rss_mib(pid: int) -> float:
    """Resident MiB of a process (0 when it is gone)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0.0
    found = re.search(r"VmRSS:\s+(\d+) kB", status)
    return int(found.group(1)) / 1024 if found else 0.0


def _requested_gpus(pod: JsonObject) -> int:
    total = 0
    for container in pod["spec"].get("containers") or []:
        total += int(((container.get("resources") or {}).get("requests") or {}).get("nvidia.com/gpu", 0))
    return total


@dataclass
class Ledger:
    """The soak's books, kept from the pod lists and scrapes of the main loop."""

    created: set[str] = field(default_factory=set)
    deleted_by_soak: set[str] = field(default_factory=set)
    evicted: set[str] = field(default_factory=set)
    seen: set[str] = field(default_factory=set)
    finished: set[str] = field(default_factory=set)
    samples: list[float] = field(default_factory=list)
    all_samples: list[float] = field(default_factory=list)
    minute_samples: list[float] = field(default_factory=list)
    idle: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    idle_samples: int = 0
    memory: dict[tuple[str, int, str], tuple[float, list[tuple[float, float]]]] = field(default_factory=dict)
    """(process, pid, role) -> (first seen in that role, its samples as (seconds since then, MiB))."""
    lost_any: bool = False
    """Whether any look found a pod lost (the soak then keeps the processes' logs)."""
    filter_calls: dict[str, float] = field(default_factory=dict)
    """Each extender's filter calls at the last look (``serving``)."""

    def sample(self, pods: list[JsonObject], capacity: int, leader_metrics: str | None, now: float) -> None:
        """One second's look (``now``: wall clock): GPUs held while pods wait gated, what each pod is."""
        waiting = bound = 0
        for pod in pods:
            name = pod["metadata"]["name"]
            self.seen.add(name)
            phase = (pod.get("status") or {}).get("phase")
            if phase in ("Succeeded", "Failed"):
                self.finished.add(name)
                continue
            if pod["spec"].get("nodeName"):
                bound += _requested_gpus(pod)
            elif pod["spec"].get("schedulingGates") and not pod["metadata"].get("deletionTimestamp"):
                created = seconds(str(pod["metadata"].get("creationTimestamp") or "")) or now
                waiting += now - created >= KEPT_AFTER
        if not capacity:
            return
        share = min(1.0, bound / capacity)
        self.all_samples.append(share)
        if not waiting:
            return
        self.samples.append(share)
        self.minute_samples.append(share)
        if leader_metrics:
            self.idle_samples += 1
            for rule in IDLE_RULES:
                self.idle[rule] += (
                    metric_value(leader_metrics, "phalanx_admission_idle_gpus", rule=rule) or 0.0
                )

    def collect_evictions(self, bed: Testbed, namespace: str) -> None:
        """Remember the pods phalanx evicted with an event (every minute: events expire after an hour)."""
        try:
            events = bed.http.request("GET", f"/api/v1/namespaces/{namespace}/events").get("items") or []
        except KubeError:
            return
        groups = set()
        for event in events:
            if event.get("reason") not in EVICTION_REASONS:
                continue
            involved = event.get("involvedObject") or {}
            if involved.get("kind") == "PodGroup":
                groups.add(str(involved.get("name")))
            else:
                self.evicted.add(str(involved.get("name")))
        # a gang's members are named after it (hack/soak.py: g<seq>-<i>)
        self.evicted |= {n for n in self.created if n.rsplit("-", 1)[0] in groups}

    def lost(self, present: set[str], on_lost_node: set[str]) -> list[str]:
        """Pods created and gone for no reason the soak knows (see the module docstring)."""
        explained = present | self.finished | self.deleted_by_soak | self.evicted | on_lost_node
        found = sorted(n for n in self.created & self.seen if n not in explained)
        self.lost_any = self.lost_any or bool(found)
        return found

    def remember_memory(self, processes: dict[str, int], serving: set[str] | None = None) -> None:
        """Note the resident size of each (name, pid) now, in its role: in ``serving``, or standby."""
        now = time.monotonic()
        for name, pid in processes.items():
            if not pid:
                continue
            mib = rss_mib(pid)
            role = "serving" if serving is None or name in serving else "standby"
            first, sizes = self.memory.setdefault((name, pid, role), (now, []))
            if mib:
                sizes.append((now - first, mib))

    def last_mib(self, name: str, pid: int) -> float:
        """The last size noted of a process, in whichever role, 0 before the first."""
        seen = [(first + sizes[-1][0], sizes[-1][1]) for (n, p, _), (first, sizes) in self.memory.items()
                if (n, p) == (name, pid) and sizes]  # fmt: skip
        return max(seen)[1] if seen else 0.0

    def growths(self) -> list[tuple[str, int, float, float]]:
        """(name and role, pid, baseline peak, last peak) of each process that lived past ``MEMORY_AFTER``."""
        rows = []
        for (process, pid, role), (_, sizes) in sorted(self.memory.items()):
            name = f"{process}, {role}"
            base = [mib for age, mib in sizes if MEMORY_AFTER <= age < MEMORY_AFTER + MEMORY_WINDOW]
            if not base:
                continue
            end = sizes[-1][0]
            last = [mib for age, mib in sizes if age >= max(MEMORY_AFTER, end - MEMORY_WINDOW)]
            rows.append((name, pid, max(base), max(last)))
        return rows

    def memory_growth(self) -> list[str]:
        """Each process's growth, peak against peak, as text."""
        return [
            f"{name} (pid {pid}) peak {base:.0f} -> {last:.0f} MiB ({100 * (last / base - 1):+.1f}%)"
            for name, pid, base, last in self.growths()
        ]

    def worst_growth(self) -> float:
        """The largest growth in percent, 0 when no process lived past its baseline."""
        return max((100 * (last / base - 1) for _, _, base, last in self.growths()), default=0.0)

    def minute_share(self) -> str:
        """The GPUs held while pods waited in the last minute, and forget them."""
        samples, self.minute_samples = self.minute_samples, []
        return f"{100 * sum(samples) / len(samples):.1f}%" if samples else "n/a (nothing waited)"

    def share(self) -> float | None:
        """The GPUs held while pods waited, over the whole run (0..1), or ``None``."""
        return sum(self.samples) / len(self.samples) if self.samples else None

    def overall(self) -> float | None:
        """The GPUs held over every second of the run (0..1), waiting or not, or ``None``."""
        return sum(self.all_samples) / len(self.all_samples) if self.all_samples else None

    def idle_breakdown(self) -> str:
        """Mean GPUs idle by rule while pods waited, the largest first."""
        if not self.idle_samples:
            return "n/a"
        means = sorted(((v / self.idle_samples, k) for k, v in self.idle.items() if v), reverse=True)
        return ", ".join(f"{k} {v:.1f}" for v, k in means) or "none"


def leader_metrics(bed: Testbed, names: tuple[str, ...]) -> str | None:
    """The ``/metrics`` page of the placement replica that leads now, or ``None``."""
    for name in names:
        port = bed.placement_metrics_ports.get(name)
        if not port or not bed.is_running(name):
            continue
        try:
            page = scrape(f"http://127.0.0.1:{port}/metrics")
        except OSError:
            continue
        if metric_value(page, "phalanx_placement_leader") == 1.0:
            return page
    return None


def filter_calls(url: str) -> float:
    """The ``filter`` calls an extender has answered (0 when it does not answer)."""
    try:
        page = scrape(f"{url}/metrics")
    except OSError:
        return 0.0
    return metric_value(page, "phalanx_extender_requests_total", verb="filter") or 0.0


def serving(bed: Testbed, names: tuple[str, ...], ledger: Ledger) -> set[str]:
    """The processes serving now: the placement replica that leads, each extender whose filter calls grew.

    An extender counts as serving from the second look at which its calls grew (the first look only
    notes them); ``ledger.filter_calls`` keeps the counts between looks.
    """
    found = {name for name in names if leads(bed, name)}
    for name, url in (("extender", bed.extender_url), ("extender-b", bed.extender_b_url)):
        calls = filter_calls(url)
        if calls > ledger.filter_calls.get(name, calls):
            found.add(name)
        ledger.filter_calls[name] = calls
    return found


def leads(bed: Testbed, name: str) -> bool:
    """Whether placement replica ``name`` holds the Lease now (its ``phalanx_placement_leader`` is 1)."""
    port = bed.placement_metrics_ports.get(name)
    if not port or not bed.is_running(name):
        return False
    try:
        return metric_value(scrape(f"http://127.0.0.1:{port}/metrics"), "phalanx_placement_leader") == 1.0
    except (OSError, KubeError):
        return False


def children(pid: int) -> list[int]:
    """The child processes of ``pid`` (gunicorn's worker of the extender)."""
    try:
        return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def product_processes(bed: Testbed, names: tuple[str, ...]) -> dict[str, int]:
    """Name -> pid of the processes whose memory the soak watches."""
    found: dict[str, int] = {}
    for extender in ("extender", "extender-b"):
        master = bed.pid(extender)
        if master:
            found[extender] = (children(master) or [master])[0]
    for name in names:
        found[name] = bed.pid(name)
    return {k: v for k, v in found.items() if v and os.path.exists(f"/proc/{v}")}
