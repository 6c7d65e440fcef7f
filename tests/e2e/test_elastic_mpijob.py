"""An elastic MPIJob through the real MPI Operator, phalanx's extender and its placement manager.

With admission gates on, as shipped: every pod of the job is created gated and released by the placement
manager. What it must do: the job (min 2, max 6 workers of 2 GPUs) alone grows to 6; a gang that
needs the room makes it shrink (the operator deletes the highest indices, ``discover_hosts.sh`` lists only
the workers left) and binds; when the gang is gone the job grows again. The three 8-GPU nodes are the
managed pool: the placement manager taints them, pins the workers (those the operator creates as the job
grows, through the pin webhook as they are created) and opens the pool to other pods.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from typing import TypeVar

import pytest
from localbed import Testbed
from workload import (
    QUEUES,
    PodTimeline,
    create_mpijob,
    create_pod,
    create_podgroup,
    create_queue,
    elastic_mpijob,
    events_for,
    get_mpijob,
    gpu_pod,
    list_pods,
    member,
    metric_value,
    podgroup,
    queue,
    scrape,
    wait_for,
)

from kubeio.attained import ATTAINED_ANNOTATION, parse_attained
from kubeio.errors import NotFoundError
from kubeio.http import JsonObject
from kubeio.pins import pin_toleration
from tests.conftest import REPO
from tests.e2e.conftest import deleted_after, wait_for_operator

pytestmark = pytest.mark.both_modes

NODES = ("gpu-node-1", "gpu-node-2", "gpu-node-3")
ROLE = "training.kubeflow.org/job-role"
T = TypeVar("T")


@pytest.fixture
def pool(operator: Testbed) -> Iterator[Testbed]:
    """The three nodes labelled into the elastic pool; label and taints removed afterwards."""
    for node in NODES:
        operator.http.request(
            "PATCH",
            f"/api/v1/nodes/{node}",
            body={"metadata": {"labels": {"phalanx.io/elastic-pool": "true"}}},
            content_type="application/merge-patch+json",
        )
    try:
        yield operator
    finally:
        for node in NODES:
            operator.http.request(
                "PATCH",
                f"/api/v1/nodes/{node}",
                body={"metadata": {"labels": {"phalanx.io/elastic-pool": None}}},
                content_type="application/merge-patch+json",
            )
        command = [
            sys.executable,
            "-m",
            "placement",
            "--kubeconfig",
            str(operator.kubeconfig),
            "--remove-pin-taints",
        ]
        done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False, cwd=REPO)
        assert done.returncode == 0, done.stderr
        assert not any(_taint(operator, node) for node in NODES), "python -m placement --remove-pin-taints"


def _taint(bed: Testbed, node: str) -> bool:
    taints = bed.http.request("GET", f"/api/v1/nodes/{node}")["spec"].get("taints") or []
    return any(t.get("key") == "phalanx.io/hostname" for t in taints)


def _running_workers(bed: Testbed, namespace: str, job: str = "elastic") -> list[str]:
    return sorted(
        p["metadata"]["name"]
        for p in list_pods(bed.http, namespace)
        if p["metadata"].get("labels", {}).get(ROLE) == "worker"
        and p["metadata"]["labels"].get("training.kubeflow.org/job-name") == job
        and p["spec"].get("nodeName")
        and p.get("status", {}).get("phase") == "Running"
        and not p["metadata"].get("deletionTimestamp")
    )


def _await_running(bed: Testbed, namespace: str, count: int, *, timeout: float, when: str = "") -> None:
    """Wait for ``count`` running workers of job ``elastic``, which only the MPI Operator's syncs bring."""
    what = f"{count} workers running" + (f" {when}" if when else "")

    def probe() -> bool:
        return len(_running_workers(bed, namespace)) == count

    wait_for_operator(bed, f"{namespace}/elastic", what, probe, timeout=timeout)


THROUGHPUT = "phalanx.io/throughput"


def _launcher_report(bed: Testbed, namespace: str, job: str) -> str:
    """The progress report on the job's launcher pod (the simulated launcher writes it there)."""
    return "".join(
        str((p["metadata"].get("annotations") or {}).get(THROUGHPUT, ""))
        for p in list_pods(bed.http, namespace)
        if p["metadata"].get("labels", {}).get(ROLE) == "launcher"
        and p["metadata"]["labels"].get("training.kubeflow.org/job-name") == job
    )


def _elastic_passes(bed: Testbed) -> float:
    """Elastic passes the running placement manager has made since it started (its metrics)."""
    try:
        page = scrape(f"http://127.0.0.1:{bed.placement_metrics_ports['placement']}/metrics")
    except OSError:  # not serving yet (URLError is an OSError)
        return 0.0
    return metric_value(page, "phalanx_placement_pass_seconds_count", **{"pass": "elastic"}) or 0.0


def _unchanged_for(read: Callable[[], T], seconds: float) -> Callable[[], T | None]:
    """A probe for ``wait_for``: what ``read`` returns once it has returned it for ``seconds``."""
    seen: list[tuple[T, float]] = []

    def probe() -> T | None:
        now, value = time.monotonic(), read()
        if not seen or seen[0][0] != value:
            seen[:] = [(value, now)]
        return value if now - seen[0][1] >= seconds else None

    return probe


def _replicas(bed: Testbed, namespace: str) -> int:
    return int(get_mpijob(bed.http, namespace, "elastic")["spec"]["mpiReplicaSpecs"]["Worker"]["replicas"])


def _gang_bound(bed: Testbed, namespace: str, members: int) -> Callable[[], bool]:
    """A probe: the ``members`` pods of the gang ``wide`` are all bound."""

    def probe() -> bool:
        pods = [p for p in list_pods(bed.http, namespace) if p["metadata"]["name"].startswith("wide-")]
        return len(pods) == members and all(p["spec"].get("nodeName") for p in pods)

    return probe


def _discovered(bed: Testbed, namespace: str) -> list[str]:
    config = bed.http.request("GET", f"/api/v1/namespaces/{namespace}/configmaps/elastic-config")
    script = str((config.get("data") or {}).get("discover_hosts.sh", ""))
    return sorted(line.split()[-1].split(".")[0] for line in script.splitlines() if line.startswith("echo"))


def test_an_elastic_job_grows_shrinks_for_a_gang_and_grows_back(pool: Testbed, namespace: str) -> None:
    """The elastic path under the shipped configuration, gated pods and the pin webhook included.

    Every pod is created gated and released by the placement manager: the job's first workers and
    launcher, each worker it grows by, the gang's members.
    """
    http = pool.http
    body = elastic_mpijob("elastic", workers=2, gpus_per_worker=2, max_workers="6", min_available=3)
    with PodTimeline(http, namespace) as timeline, deleted_after(pool, namespace, "elastic"):
        create_mpijob(http, namespace, body)
        start = time.monotonic()
        _await_running(pool, namespace, 6, timeout=90)
        print(f"\nelastic job grew to 6 running workers {time.monotonic() - start:.1f}s after it was created")
        assert _replicas(pool, namespace) == 6
        wait_for("discover_hosts.sh lists 6", lambda: len(_discovered(pool, namespace)) == 6, timeout=30)
        shown = json.loads(
            get_mpijob(http, namespace, "elastic")["metadata"]["annotations"]["phalanx.io/elastic-plan"]
        )
        print(f"the plan shown on the MPIJob: {shown}")
        assert shown["workers"] == 6 and sum(shown["nodes"].values()) == 6
        at_creation = _pinned_at_creation(pool, namespace)
        print(f"pinned by the webhook as they were created: {at_creation}")
        grown = {f"elastic-worker-{i}" for i in range(2, 6)}  # 0 and 1 too if the first pass came first
        assert grown <= set(at_creation), "every worker the job grew by was pinned as it was created"

        create_podgroup(http, namespace, podgroup("wide", 2))
        for i in range(2):
            create_pod(http, namespace, member(f"wide-{i}", "wide", 8))
        start = time.monotonic()

        # The gang's room is the job's shrink, which only the operator's sync of the job brings.
        bound = _gang_bound(pool, namespace, 2)
        wait_for_operator(pool, f"{namespace}/elastic", "the 2 x 8 GPU gang bound", bound, timeout=120)
        print(f"the gang bound {time.monotonic() - start:.1f}s after it was created")
        assert _replicas(pool, namespace) == 4
        # The operator removed the highest indices. A worker the placement manager moved a moment before (a
        # consolidation while the job grew) may still be coming back on its new node, or be re-pinned if the
        # gang took that node: so the four left are awaited, not sampled once.
        lowest = [f"elastic-worker-{i}" for i in range(4)]
        left = wait_for_operator(
            pool,
            f"{namespace}/elastic",
            "workers 0-3 running",
            lambda: lowest if _running_workers(pool, namespace) == lowest else None,
            timeout=30,
        )
        remaining = {
            p["metadata"]["name"]
            for p in _workers(pool, namespace)
            if not p["metadata"].get("deletionTimestamp")
        }
        assert not {"elastic-worker-4", "elastic-worker-5"} & remaining, remaining
        wait_for(
            "discover_hosts.sh lists the 4 left", lambda: _discovered(pool, namespace) == left, timeout=30
        )

        for i in range(2):
            http.request(
                "DELETE", f"/api/v1/namespaces/{namespace}/pods/wide-{i}", body={"gracePeriodSeconds": 0}
            )
        start = time.monotonic()
        _await_running(pool, namespace, 6, timeout=90, when="again")
        print(f"the job grew back to 6 {time.monotonic() - start:.1f}s after the gang was gone")
        created = set(timeline.created_at)
        print(f"created gated: {sorted(timeline.created_gated)} of {sorted(created)}")
        assert {f"elastic-worker-{i}" for i in range(6)} | {"wide-0", "wide-1"} <= created
        assert created == timeline.created_gated, (
            f"created ungated: {sorted(created - timeline.created_gated)}"
        )
        released = [e for e in events_for(http, namespace, "elastic") if e["reason"] == "AdmissionReleased"]
        assert released, "the placement manager released the job's pods, with an event on its PodGroup"


def _pinned_at_creation(bed: Testbed, namespace: str, job: str = "elastic") -> list[str]:
    """Workers the pin webhook pinned as they were created (its events on the MPIJob name them)."""
    query = {"fieldSelector": f"involvedObject.name={job},reason=Pinned"}
    events = bed.http.request("GET", f"/api/v1/namespaces/{namespace}/events", query=query).get("items") or []
    return sorted(str(e["message"]).split()[1] for e in events if "as it was created" in str(e["message"]))


def _taints_on(bed: Testbed) -> bool:
    return all(_taint(bed, node) for node in NODES)


def _workers(bed: Testbed, namespace: str) -> list[JsonObject]:
    return [
        p for p in list_pods(bed.http, namespace) if p["metadata"].get("labels", {}).get(ROLE) == "worker"
    ]


def _moves(bed: Testbed, namespace: str) -> list[str]:
    query = {"fieldSelector": "involvedObject.name=spread,reason=Moved"}
    events = bed.http.request("GET", f"/api/v1/namespaces/{namespace}/events", query=query).get("items") or []
    return sorted(str(e["message"]) for e in events)


def _placed_workers(bed: Testbed, namespace: str, job: str) -> dict[str, int]:
    """How many pods under each worker name kube-scheduler placed (its ``Scheduled`` events, by UID).

    A move deletes a worker and its operator re-creates it under the same name, so a worker moved once
    was placed twice. Counted from kube-scheduler's events rather than phalanx's ``Moved`` events: a
    ``Moved`` event is written just before its deletion, so a manager killed between the two leaves an
    event for a move its successor then makes (and tells) again.
    """
    query = {"fieldSelector": "involvedObject.kind=Pod,reason=Scheduled"}
    events = bed.http.request("GET", f"/api/v1/namespaces/{namespace}/events", query=query).get("items") or []
    placed: dict[str, set[str]] = {}
    for event in events:
        obj = event["involvedObject"]
        if str(obj["name"]).startswith(f"{job}-worker-"):
            placed.setdefault(str(obj["name"]), set()).add(str(obj["uid"]))
    return {name: len(uids) for name, uids in sorted(placed.items())}


def test_a_spread_job_is_consolidated_each_worker_moved_at_most_once_even_across_a_crash(
    pool: Testbed, namespace: str
) -> None:
    """Blockers make the job spread over three nodes; once they finish, the job moves onto one node.

    The placement manager is SIGKILLed right after its first move, before the replacement is pinned:
    restarted, it pins the replacement where the plan wants it, and no worker is moved twice. The job
    started moments ago (``is_starting``), so its moves may go in one pass: the SIGKILL can fall
    between two of them, and the successor makes the second.
    """
    http = pool.http
    wait_for("the pool tainted", lambda: _taints_on(pool), timeout=30)
    for node, gpus in (("gpu-node-1", 4), ("gpu-node-2", 6), ("gpu-node-3", 6)):
        blocker = gpu_pod(f"block-{node}", gpus)
        blocker["spec"]["tolerations"] = [pin_toleration(node)]
        create_pod(http, namespace, blocker)
    wait_for(
        "blockers bound",
        lambda: all(p["spec"].get("nodeName") for p in list_pods(http, namespace)),
        timeout=30,
    )
    body = elastic_mpijob("spread", workers=4, gpus_per_worker=2, max_workers="4", min_available=3)
    create_mpijob(http, namespace, body)
    with deleted_after(pool, namespace, "spread"):
        wait_for(
            "4 workers running", lambda: len(_running_workers(pool, namespace, "spread")) == 4, timeout=90
        )
        nodes = {p["spec"]["nodeName"] for p in _workers(pool, namespace)}
        assert len(nodes) == 3, f"the blockers spread the job over three nodes, got {sorted(nodes)}"
        for node in ("gpu-node-1", "gpu-node-2", "gpu-node-3"):
            http.request(
                "DELETE", f"/api/v1/namespaces/{namespace}/pods/block-{node}", body={"gracePeriodSeconds": 0}
            )
        # The pin webhook dies with the manager; taken away here, so that the replacement the operator
        # makes of the moved worker is created unpinned even if it comes before the SIGKILL below.
        pool.set_pin_webhook(enabled=False)
        try:
            before = {str(p["metadata"]["uid"]) for p in _workers(pool, namespace)}

            def moved_worker_going() -> bool:
                now = {str(p["metadata"]["uid"]): p for p in _workers(pool, namespace)}
                return any(uid not in now or now[uid]["metadata"].get("deletionTimestamp") for uid in before)

            # The Moved event is written just before the worker's deletion: kill once the deletion is in.
            wait_for("the first move", lambda: _moves(pool, namespace), timeout=30, interval=0.05)
            wait_for("the moved worker deleted", moved_worker_going, timeout=30, interval=0.05)
            pool.kill_placement()
            fewest = len(_running_workers(pool, namespace, "spread"))

            def unpinned() -> list[str]:
                return [
                    str(p["metadata"]["name"])
                    for p in _workers(pool, namespace)
                    if not p["spec"].get("nodeName") and not p["metadata"].get("deletionTimestamp")
                ]

            # The operator re-creates the moved worker when it syncs (seconds on a busy machine); with the
            # manager dead and the pin webhook gone nobody pins it, and the tainted pool keeps it unbound.
            wait_for_operator(
                pool,
                f"{namespace}/spread",
                "the moved worker re-created and waiting to be pinned",
                unpinned,
                timeout=60,
            )
            print(f"\nafter the SIGKILL, workers waiting to be pinned: {unpinned()}")
        finally:
            pool.start_placement()  # registers the webhook again

        def consolidated() -> bool:
            nonlocal fewest
            running = _running_workers(pool, namespace, "spread")
            fewest = min(fewest, len(running))
            placed = {p["spec"].get("nodeName") for p in _workers(pool, namespace)}
            return len(running) == 4 and len(placed) == 1

        wait_for_operator(
            pool, f"{namespace}/spread", "the job on one node", consolidated, timeout=90, interval=0.1
        )
        moves = _moves(pool, namespace)
        placed = _placed_workers(pool, namespace, "spread")
        print(f"moves: {moves}; placements per worker: {placed}; fewest running workers seen: {fewest}")
        moved = sorted(name for name, times in placed.items() if times > 1)
        assert len(moved) == 2, f"two workers were on the wrong nodes: two moved, got {placed}"
        assert all(times <= 2 for times in placed.values()), f"a worker moved twice: {placed}"
        told = sorted({str(message).split()[1] for message in moves})
        assert told == moved, f"every move, and only those, told in a Moved event: {moves}"
        assert fewest >= 2, "never below the job's minimum of 2 running workers"
        node = {p["spec"]["nodeName"] for p in _workers(pool, namespace)}.pop()
        for pod in _workers(pool, namespace):
            pins = [
                t["value"]
                for t in pod["spec"].get("tolerations", [])
                if t.get("key") == "phalanx.io/hostname" and t.get("value")
            ]
            assert pins in ([], [node]), f"{pod['metadata']['name']} pinned to {pins}, bound to {node}"


@pytest.mark.extender_only("the elastic pass turns the declaration down before anything is placed")
def test_a_bad_elastic_declaration_gets_an_event_and_nothing_changes(
    operator: Testbed, namespace: str
) -> None:
    http = operator.http
    body = elastic_mpijob("sloppy", workers=2, gpus_per_worker=2, max_workers="lots", min_available=3)
    create_mpijob(http, namespace, body)
    with deleted_after(operator, namespace, "sloppy"):
        query = {"fieldSelector": "involvedObject.name=sloppy,reason=InvalidElasticJob"}

        def told() -> str | None:
            items = (
                http.request("GET", f"/api/v1/namespaces/{namespace}/events", query=query).get("items") or []
            )
            return str(items[0]["message"]) if items else None

        message = wait_for("an InvalidElasticJob event", told, timeout=30)
        print(f"\nInvalidElasticJob: {message}")
        why = "annotation phalanx.io/max-workers must be a whole number of at most 9 digits, got 'lots'"
        assert message == f"MPIJob {namespace}/sloppy: {why}"
        time.sleep(3)  # three passes of the placement manager
        assert (
            int(get_mpijob(http, namespace, "sloppy")["spec"]["mpiReplicaSpecs"]["Worker"]["replicas"]) == 2
        )


def test_a_gang_needing_room_on_every_node_binds_beside_an_elastic_job_filling_them(
    pool: Testbed, namespace: str
) -> None:
    """A 3 x 6-GPU gang arrives while an elastic job (12 workers of 2 GPUs) fills the three 8-GPU nodes.

    Giving back 18 GPUs is not enough: the job's 3 remaining workers packed on one node would leave
    2 + 8 + 8 free, and the gang would wait for ever. The placement manager keeps 6 GPUs free on each
    node where the gang's planner puts it and moves the workers in its way in the same pass.
    """
    http = pool.http
    body = elastic_mpijob("elastic", workers=2, gpus_per_worker=2, max_workers="12", min_available=2)
    with deleted_after(pool, namespace, "elastic"):
        create_mpijob(http, namespace, body)
        _await_running(pool, namespace, 12, timeout=180)
        create_podgroup(http, namespace, podgroup("wide", 3))
        for i in range(3):
            create_pod(http, namespace, member(f"wide-{i}", "wide", 6))
        start = time.monotonic()

        # The gang's room is the job's shrink to 3, which only the operator's sync of the job brings.
        bound = _gang_bound(pool, namespace, 3)
        wait_for_operator(pool, f"{namespace}/elastic", "the 3 x 6 GPU gang bound", bound, timeout=180)
        print(f"\nthe 3 x 6 gang bound {time.monotonic() - start:.1f}s after it was created")
        nodes = sorted(
            p["spec"]["nodeName"]
            for p in list_pods(http, namespace)
            if p["metadata"]["name"].startswith("wide-")
        )
        assert nodes == list(NODES), "one member on each node: the only shape 3 x 6 fits on 3 x 8"
        assert _replicas(pool, namespace) == 3
        moves = [str(e["message"]) for e in events_for(http, namespace, "elastic") if e["reason"] == "Moved"]
        print(f"moves: {moves}")
        _await_running(pool, namespace, 3, timeout=60)
        for i in range(3):
            http.request(
                "DELETE", f"/api/v1/namespaces/{namespace}/pods/wide-{i}", body={"gracePeriodSeconds": 0}
            )


def test_the_job_that_reports_it_scales_ends_with_more_workers(pool: Testbed, namespace: str) -> None:
    """Two elastic jobs share the three nodes; the simulated kubelet reports each one's throughput.

    ``lin`` scales linearly, ``flat`` gains little from more GPUs (``phalanx.io/sim-scaling: 0.2``). Both
    report through ``phalanx.io/throughput`` on their launcher pods as a launcher would. Grown at once
    into the free GPUs, each is seen at the size it grew to, which alone says nothing of how it scales; a
    gang then takes 16 GPUs and both shrink, so each is seen at a second size. When the gang is gone, the
    GPUs go to the job they speed up most, by what the placement manager learned and kept on each MPIJob.
    Once the sizes stand still, a restarted placement manager decides the same from what the API server
    holds.
    """
    http = pool.http
    jobs = {"lin": "1", "flat": "0.2"}

    def kept(name: str) -> list[list[float]]:
        annotations = get_mpijob(http, namespace, name)["metadata"].get("annotations") or {}
        return list(json.loads(annotations.get("phalanx.io/throughput-samples", "[]")))

    def running() -> dict[str, int]:
        return {name: len(_running_workers(pool, namespace, name)) for name in jobs}

    try:
        for name, scaling in jobs.items():
            body = elastic_mpijob(name, workers=2, gpus_per_worker=2, max_workers="12", min_available=2)
            body["metadata"]["annotations"]["phalanx.io/sim-scaling"] = scaling
            create_mpijob(http, namespace, body)

        def seen_grown(name: str) -> bool:
            """Grown past its 2 starting workers and seen at the size it grew to.

            A report at a size is written once the job has run at it for a while (a launcher measures
            its rate over a window): a size held for half a second is never seen.
            """
            replicas = int(get_mpijob(http, namespace, name)["spec"]["mpiReplicaSpecs"]["Worker"]["replicas"])
            return replicas > 2 and any(int(sample[0]) == replicas for sample in kept(name))

        seen: set[str] = set()

        def both_seen_grown() -> bool:
            """Each seen grown once, not both at the same moment.

            The learning may shrink one job (to give GPUs to the other) before the other's report at
            its grown size is written.
            """
            seen.update(name for name in jobs if name not in seen and seen_grown(name))
            return seen == set(jobs)

        keys = tuple(f"{namespace}/{name}" for name in jobs)  # the launchers' reports write the jobs
        wait_for_operator(pool, keys, "both seen at the size they grew to", both_seen_grown, timeout=180)
        create_podgroup(http, namespace, podgroup("wide", 2))
        for i in range(2):
            create_pod(http, namespace, member(f"wide-{i}", "wide", 8))
        # The gang bound means both shrank: 8 GPUs are left for the two, so neither stays at its grown
        # size. Samples alone can say two sizes too early: a job seen growing (5 of 6 running), or seen
        # at one size on two spans (a move), would pass while the gang still waits, and the gang deleted
        # then would leave each job's curve known at one size only.
        bound = _gang_bound(pool, namespace, 2)
        wait_for_operator(pool, keys, "the 2 x 8 GPU gang bound", bound, timeout=180)
        wait_for_operator(
            pool,
            keys,
            "both seen at two worker counts",
            lambda: all(len({int(sample[0]) for sample in kept(name)}) >= 2 for name in jobs),
            timeout=180,
        )
        for i in range(2):
            http.request(
                "DELETE", f"/api/v1/namespaces/{namespace}/pods/wide-{i}", body={"gracePeriodSeconds": 0}
            )

        def settled() -> dict[str, int] | None:
            now = running()
            return now if now["lin"] > now["flat"] and sum(now.values()) >= 10 else None

        sizes = wait_for_operator(pool, keys, "the job that scales runs more workers", settled, timeout=180)
        print(f"\nrunning workers: {sizes}")
        for name in jobs:
            print(f"{name}: samples kept on the MPIJob: {kept(name)}")
        told = [str(e["message"]) for e in events_for(http, namespace, "flat") if e["reason"] == "Resized"]
        print(f"flat resized: {told}")
        assert any("predicted speedup" in message and "fitted on 2 samples" in message for message in told), (
            told
        )
        assert all("; attained service " in message for message in told), told
        # Each job's attained service is kept on it, written with the job's resizes: what it ran before
        # its workers restarted is not forgotten (a restarted manager counts on from it).
        served = {
            name: parse_attained(
                (get_mpijob(http, namespace, name)["metadata"].get("annotations") or {}).get(
                    ATTAINED_ANNOTATION
                )
            )
            for name in jobs
        }
        print(f"attained service kept on the MPIJobs: {served}")
        assert all(record is not None and record.gpu_seconds > 0 for record in served.values()), served
        on_mpijobs = [
            n
            for n in jobs
            if THROUGHPUT in (get_mpijob(http, namespace, n)["metadata"].get("annotations") or {})
        ]
        assert not on_mpijobs, f"reports belong on the launcher pods, not the MPIJobs: {on_mpijobs}"
        # The moves re-create workers, at times every worker of a job at once: the gang is then short
        # until the operator has re-created them, which must not get it evicted as stale (its launcher
        # would go too, and the job restart from scratch with no report on its new launcher).
        evicted = [
            str(e["message"])
            for name in jobs
            for e in events_for(http, namespace, name)
            if e["reason"] == "GangEvicted"
        ]
        assert not evicted, f"a job phalanx moved was evicted as a stale gang: {evicted}"
        assert all(_launcher_report(pool, namespace, name) for name in jobs), (
            "each launcher pod carries its report"
        )

        # A restarted placement manager reads the samples kept on each MPIJob and the reports on the pods:
        # once the sizes stand still, it decides the same sizes and resizes nothing.
        def sizes_and_actions() -> tuple[dict[str, int], int]:
            """Each job's replicas, and its resizes and moves so far (a move changes what is learned)."""
            replicas = {
                name: int(get_mpijob(http, namespace, name)["spec"]["mpiReplicaSpecs"]["Worker"]["replicas"])
                for name in jobs
            }
            actions = sum(
                1
                for name in jobs
                for e in events_for(http, namespace, name)
                if e["reason"] in ("Resized", "Moved")
            )
            return replicas, actions

        # Longer than a report's period (10 s): the last reports at these sizes are in the samples.
        steady = _unchanged_for(sizes_and_actions, 12.0)
        before = wait_for("no resize nor move for 12 s", steady, timeout=150, interval=1.0)
        learned_before = {name: kept(name) for name in jobs}
        pool.kill_placement()
        pool.start_placement()
        wait_for("5 elastic passes by the restarted manager", lambda: _elastic_passes(pool) >= 5, timeout=60)
        after = sizes_and_actions()
        print(f"before the restart: {before}, samples {learned_before}; after 5 passes: {after}")
        assert after == before, (
            "the restarted manager decides the sizes the first one left: no resize, no move"
        )
    finally:  # both jobs, then wait once: each job's pods go with it
        for name in jobs:
            told = [f"{e['reason']}: {e['message']}" for e in events_for(http, namespace, name)]
            print(f"{name} events: {[t for t in told if t.startswith(('Resized', 'Moved', 'GangEvicted'))]}")
            print(f"{name} samples: {kept(name)}, running {running()}")
            with contextlib.suppress(NotFoundError):
                http.request("DELETE", f"/apis/kubeflow.org/v2beta1/namespaces/{namespace}/mpijobs/{name}")
        for i in range(2):
            with contextlib.suppress(NotFoundError):
                http.request(
                    "DELETE", f"/api/v1/namespaces/{namespace}/pods/wide-{i}", body={"gracePeriodSeconds": 0}
                )
        wait_for("the jobs' pods deleted", lambda: not list_pods(http, namespace), timeout=120)


def test_two_elastic_jobs_in_two_queues_converge_once_each_worker_restarted_at_most_once(
    pool: Testbed, namespace: str
) -> None:
    """``ea`` (queue conv-a) fills the three nodes; ``eb`` (queue conv-b, the same quota) arrives.

    Each queue deserves half of the 24 GPUs, so ``ea`` gives 6 of its 12 workers to ``eb``. The sizes go
    one way each (``ea`` down, ``eb`` up: no overshoot and back), and no worker is re-created more than
    once on the way (a move re-creates a worker; a shrink removes the highest indices).
    """
    http = pool.http
    jobs = {"ea": "conv-a", "eb": "conv-b"}
    uids: dict[str, set[str]] = {}  # worker pod name -> every UID seen under it
    sizes: dict[str, list[int]] = {name: [] for name in jobs}  # each change of Worker.replicas, in order

    def watch() -> dict[str, int]:
        """Record the workers' UIDs and each job's replicas; the running workers per job."""
        for pod in _workers(pool, namespace):
            uids.setdefault(str(pod["metadata"]["name"]), set()).add(str(pod["metadata"]["uid"]))
        for name in jobs:
            try:
                job = get_mpijob(http, namespace, name)
            except NotFoundError:  # not created yet
                continue
            replicas = int(job["spec"]["mpiReplicaSpecs"]["Worker"]["replicas"])
            if not sizes[name] or sizes[name][-1] != replicas:
                sizes[name].append(replicas)
        return {name: len(_running_workers(pool, namespace, name)) for name in jobs}

    for queue_name in jobs.values():
        create_queue(http, queue(queue_name, quota=12, weight=1))
    try:
        body = elastic_mpijob("ea", workers=2, gpus_per_worker=2, max_workers="12", min_available=2)
        for role in ("Launcher", "Worker"):
            template = body["spec"]["mpiReplicaSpecs"][role]["template"]
            template.setdefault("metadata", {}).setdefault("labels", {})["phalanx.io/queue"] = "conv-a"
        create_mpijob(http, namespace, body)
        wait_for_operator(
            pool, f"{namespace}/ea", "ea grown into all 24 GPUs", lambda: watch()["ea"] == 12, timeout=180
        )
        uids.clear()  # from here on: what the second job's arrival does
        body = elastic_mpijob("eb", workers=1, gpus_per_worker=2, max_workers="12", min_available=2)
        for role in ("Launcher", "Worker"):
            template = body["spec"]["mpiReplicaSpecs"][role]["template"]
            template.setdefault("metadata", {}).setdefault("labels", {})["phalanx.io/queue"] = "conv-b"
        create_mpijob(http, namespace, body)
        sizes["ea"] = sizes["ea"][-1:]
        steady = _unchanged_for(watch, 8.0)

        def converged() -> dict[str, int] | None:
            now = steady()
            return now if now == {"ea": 6, "eb": 6} else None

        keys = tuple(f"{namespace}/{name}" for name in jobs)
        running = wait_for_operator(pool, keys, "6 workers each, unchanged for 8 s", converged, timeout=240)
        restarted = {name: len(seen) - 1 for name, seen in sorted(uids.items()) if len(seen) > 1}
        print(f"\nrunning {running}; replicas over time {sizes}; workers re-created: {restarted}")
        assert sizes["ea"] == sorted(sizes["ea"], reverse=True), f"ea only shrinks: {sizes['ea']}"
        assert sizes["eb"] == sorted(sizes["eb"]), f"eb only grows: {sizes['eb']}"
        assert all(times <= 1 for times in restarted.values()), f"re-created more than once: {restarted}"
    finally:
        for name in jobs:
            with contextlib.suppress(NotFoundError):
                http.request("DELETE", f"/apis/kubeflow.org/v2beta1/namespaces/{namespace}/mpijobs/{name}")
        wait_for("the jobs' pods deleted", lambda: not list_pods(http, namespace), timeout=120)
        for queue_name in jobs.values():
            with contextlib.suppress(NotFoundError):
                http.request("DELETE", f"{QUEUES}/{queue_name}")
