"""The placement round as ``placement.__main__`` wires it (``placement.assembly``), over in-memory fakes.

The wiring, not each pass, is under test: which pass sees what, in which order, and what one pass tells
the next within a round.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from prometheus_client import CollectorRegistry

from kubeio.mpijobs import MpiJob
from placement.assembly import RoundPorts, assemble
from placement.elastic_pass import ElasticReport
from placement.placement_metrics import PlacementMetrics
from placement.placement_settings import PlacementSettings
from placement.queue_pass import QueueReport
from placement.views import SharedView
from scheduling.cluster.snapshot import ClusterSnapshot
from scheduling.elastic import ElasticSettings
from scheduling.model import Pod, Resources
from scheduling.queues import Queue
from scheduling.topology import TopologyCache
from tests.builders import FakeCluster, FakeEvents, a_node, a_pod, snapshot_of
from tests.placement.fakes import FakeJobs, FakePins
from tests.scheduling.queues.builders import gpu_queue


@dataclass
class Api(FakeCluster):
    """The cluster with its Queues, PodGroup and Queue status writes, and pod deletions."""

    queue_list: list[Queue] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    version: int = 0

    def snapshot(self) -> ClusterSnapshot:
        self.version += 1  # tests change the dicts in place: every snapshot may differ
        built = snapshot_of(
            self.nodes.values(), self.pods.values(), self.groups.values(), queues=self.queue_list
        )
        return replace(built, version=self.version)

    def set_status(self, *args: Any) -> None:
        """PodGroup status (namespace, name, status) and Queue status (name, status): not under test."""

    def delete_pod(self, namespace: str, name: str, uid: str, *, grace_seconds: int | None = None) -> bool:
        self.deleted.append(f"{namespace}/{name}")
        return self.pods.pop(f"{namespace}/{name}", None) is not None


def worker(job: str, index: int, queue: str, node: str | None, gpus: int) -> Pod:
    """A worker of MPIJob ``job`` as the MPI Operator makes it: labelled into the job's PodGroup."""
    pod = a_pod(f"{job}-worker-{index}").gpus(gpus).group(job).queue(queue)
    built = (pod.on(node, range((index % 2) * gpus, (index % 2 + 1) * gpus)) if node else pod).build()
    labels: Mapping[str, str] = {
        **built.labels,
        "training.kubeflow.org/job-name": job,
        "training.kubeflow.org/job-role": "worker",
        "training.kubeflow.org/replica-index": str(index),
    }
    return replace(built, labels=labels)


def elastic_job(name: str, workers: int, *, low: int, high: int, gpus: int) -> MpiJob:
    return MpiJob("ml", name, f"uid-{name}", name, workers, low + 1, str(high), Resources(gpus=gpus), None)


def manager(api: Api, jobs: FakeJobs) -> tuple[Any, Any, CollectorRegistry]:
    """A fresh placement manager's round, wired as ``placement.__main__`` wires it."""
    registry = CollectorRegistry()
    ports = RoundPorts(
        cache=api,
        groups=api,
        queues=api,
        mpijobs=jobs,
        pins=FakePins(api),
        events=FakeEvents(),
        topologies=TopologyCache(),
    )
    settings = PlacementSettings(elastic=ElasticSettings(cooldown_seconds=0))
    reader, passes = assemble(ports, settings, PlacementMetrics.create(registry), SharedView())
    return reader, passes, registry


def test_a_fresh_manager_shrinks_an_elastic_job_for_a_starved_queue_and_evicts_nothing() -> None:
    # Queues a and b each own half of two 8-GPU nodes. Queue a holds both: its elastic job on n1 (2
    # workers of 4 GPUs, at least 1) and a gang of two 4-GPU members on n2. Queue b's 4-GPU pod waits.
    # One worker fewer gives b its share back; evicting the job or the gang would also do, at the cost
    # of a whole job of queue a.
    api = Api(queue_list=[gpu_queue("a", quota=8), gpu_queue("b", quota=8)])
    api.add(a_node("n1").build(), a_node("n2").build())
    api.add(*(worker("train", i, "a", "n1", 4) for i in range(2)))
    api.add(
        *(
            a_pod(f"a1-{i}").gpus(4).group("a1").queue("a").on("n2", range(4 * i, 4 * i + 4)).build()
            for i in range(2)
        )
    )
    api.add(a_pod("b1").gpus(4).queue("b").build())
    jobs = FakeJobs([elastic_job("train", 2, low=1, high=2, gpus=4)])
    reader, passes, registry = manager(api, jobs)

    report = passes.run(reader.read())  # the first round of a fresh process

    assert report.failed == []
    elastic = report.reports["elastic"]
    assert isinstance(elastic, ElasticReport)
    assert jobs.resized == [("ml/train", 1)], "the job shrinks to its minimum for queue b"
    assert elastic.giving_back == ("ml/train",)
    queue = report.reports["queue"]
    assert isinstance(queue, QueueReport)
    assert queue.evicted == () and api.deleted == [], "reclaim waits for the room the shrink frees"
    assert queue.messages == ("reclaim waits: elastic job(s) ml/train give room back by shrinking first",)

    api.pods.pop("ml/train-worker-1")  # the operator removes the highest index: b1 fits now
    again = passes.run(reader.read())
    assert jobs.resized == [("ml/train", 1)] and api.deleted == [], "nothing more to do"
    assert again.failed == []
    for name in ("gang", "elastic", "queue"):
        assert registry.get_sample_value("phalanx_placement_pass_seconds_count", {"pass": name}) == 2
