"""In-memory fakes of the placement manager's writers (MPIJobs, pins and pool taints, pod deletions)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from kubeio.mpijobs import MpiJob
from scheduling.elastic.attained import Attained
from tests.builders import FakeCluster


@dataclass
class FakeJobs:
    jobs: list[MpiJob]
    resized: list[tuple[str, int]] = field(default_factory=list)
    plans: list[tuple[str, str]] = field(default_factory=list)
    calls: list[str] = field(default_factory=list)
    writes: list[tuple[str, int | None, str | None, str | None]] = field(default_factory=list)

    def list(self) -> list[MpiJob]:
        return self.jobs

    def update(
        self,
        namespace: str,
        name: str,
        *,
        replicas: int | None = None,
        plan: str | None = None,
        samples: str | None = None,
        moved_at: float | None = None,
        attained: Attained | None = None,
    ) -> None:
        key = f"{namespace}/{name}"
        self.calls.append("update")
        self.writes.append((key, replicas, plan, samples))
        if replicas is not None:
            self.resized.append((key, replicas))
        if plan is not None:
            self.plans.append((key, plan))
        changes = {
            field: value
            for field, value in (
                ("replicas", replicas),
                ("plan", plan),
                ("samples", samples),
                ("moved_at", moved_at),
                ("attained", attained),
            )
            if value is not None
        }
        self.jobs = [replace(j, **changes) if j.key == key else j for j in self.jobs]  # type: ignore[arg-type]


@dataclass
class FakePins:
    cluster: FakeCluster
    pinned: list[tuple[str, str]] = field(default_factory=list)
    tainted: list[tuple[str, bool]] = field(default_factory=list)
    opened: list[str] = field(default_factory=list)

    def pin_pod(self, namespace: str, name: str, uid: str, node: str) -> bool:
        pod = self.cluster.pods.get(f"{namespace}/{name}")
        if pod is None or pod.uid != uid:
            return False
        self.pinned.append((pod.key, node))
        self.cluster.pods[pod.key] = replace(pod, pinned=pod.pinned | {node})
        return True

    def open_pool(self, namespace: str, name: str, uid: str) -> bool:
        pod = self.cluster.pods[f"{namespace}/{name}"]
        self.opened.append(pod.key)
        self.cluster.pods[pod.key] = replace(pod, tolerates_pool=True)
        return True

    def taint_node(self, node: str, *, present: bool) -> bool:
        self.tainted.append((node, present))
        self.cluster.nodes[node] = replace(self.cluster.nodes[node], pin_taint=present)
        return True


@dataclass
class FakeDeleter:
    cluster: FakeCluster
    deleted: list[str] = field(default_factory=list)

    def delete_pod(self, namespace: str, name: str, uid: str, *, grace_seconds: int | None = None) -> bool:
        self.deleted.append(f"{namespace}/{name}")
        return self.cluster.pods.pop(f"{namespace}/{name}", None) is not None
