"""Fixtures for end-to-end tests on the real local control plane (hack/localcluster/).

One test bed per test session: etcd, kube-apiserver and kube-scheduler built from the pinned Kubernetes
release, the extender under gunicorn, the simulated kubelet, and simulated 8-GPU nodes.
"""

from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
from collections.abc import Callable, Generator, Iterator, Mapping
from itertools import count
from pathlib import Path
from typing import Any, TypeVar

import orjson
import pytest

from tests.conftest import REPO

sys.path.insert(0, str(REPO / "hack"))

from localbed import Testbed
from workload import (
    QUEUES,
    create_pod,
    create_podgroup,
    create_queue,
    delete_pods,
    ensure_namespace,
    gpu_pod,
    list_pods,
    live,
    member,
    podgroup,
    queue,
    wait_for,
)

from kubeio.errors import NotFoundError
from scheduling.model import ADMISSION_GATE
from testbed.nodes import SimNodeSpec, fleet, topology_from_file
from tests.e2e.diagnosis import describe

BRIDGED_A6000 = REPO / "hack" / "topologies" / "rtx-a6000-8gpu-nvlink-bridge-pairs_unige-baobab-gpu048.txt"

T = TypeVar("T")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test under tests/e2e carries the ``e2e`` marker, so ``-m 'not e2e'`` selects unit tests."""
    for item in items:
        if "tests/e2e" in str(item.path):
            item.add_marker(pytest.mark.e2e)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """A failed test on a bed gets its namespace's pods, events and log lines in its report (diagnosis.py).

    Added at the phase that failed, while the test's fixtures (its namespace's pods among them) still
    stand: teardown deletes them.
    """
    report: pytest.TestReport = yield
    funcargs = getattr(item, "funcargs", {})
    namespace = funcargs.get("namespace")
    bed = next((value for value in funcargs.values() if isinstance(value, Testbed)), None)
    if report.failed and isinstance(namespace, str) and bed is not None:
        report.sections.append((f"phalanx diagnosis of {namespace} ({call.when})", describe(bed, namespace)))
    return report


MODES = ("extender", "sidecar")
"""The two ways phalanx places pods: the extender beside kube-scheduler (as the manifests install it),
and the framework sidecar (docs/design/framework-sidecar.md)."""


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """A test of a module marked ``both_modes`` runs in each of ``MODES`` on the session's bed.

    Module-scoped, so the module's tests run in one mode, then in the other: the bed switches twice
    per module (``Testbed.use_sidecar``, a few seconds). A test of such a module that is about the
    extender itself (its routes, its verdicts on pods created ungated) is marked ``extender_only``
    and says so; it runs once. A module marked ``sidecar_only`` is about the sidecar alone.
    """
    test = metafunc.definition
    if test.get_closest_marker("sidecar_only"):
        metafunc.parametrize("phalanx_mode", ("sidecar",), indirect=True, scope="module")
    elif test.get_closest_marker("both_modes") and not test.get_closest_marker("extender_only"):
        metafunc.parametrize("phalanx_mode", MODES, indirect=True, scope="module")


@pytest.fixture(autouse=True)
def phalanx_mode(request: pytest.FixtureRequest) -> str | None:
    """The mode the session's bed runs this test in: the test's parameter, else ``extender``.

    ``None`` for a test that does not use the session's bed (it brings its own, or none).
    """
    if "testbed" not in request.fixturenames:
        return None
    bed: Testbed = request.getfixturevalue("testbed")
    mode: str = getattr(request, "param", "extender")
    if bed.sidecar != (mode == "sidecar"):
        bed.use_sidecar(mode == "sidecar")
    return mode


def session_nodes() -> list[SimNodeSpec]:
    """The session bed's nodes: ``gpu-node-1..3``, 8 bridged RTX A6000 each, one per rack."""
    return fleet(3, gpus=8, racks_per_zone=3, topology=topology_from_file(BRIDGED_A6000))


NODE_GRACE_SECONDS = 15
"""kube-controller-manager's ``--node-monitor-grace-period`` on the session's bed (default 50 s): a node
whose simulated kubelet a test stops is marked unreachable 15 s later (tests/e2e/test_dead_nodes.py)."""


@pytest.fixture(scope="session")
def testbed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Testbed]:
    """The shipped configuration (``Testbed``'s defaults) on three 8x RTX A6000 nodes, torn down after.

    Admission gates on, both webhooks over TLS, one placement replica; stale gangs evicted after 3 s
    instead of 60 and dead nodes marked after 15 s instead of 50, so that tests take seconds.
    """
    bed = Testbed(
        Path(tmp_path_factory.mktemp("testbed")), placement_grace=3.0, node_grace_seconds=NODE_GRACE_SECONDS
    )
    try:
        bed.start()
        bed.add_nodes(session_nodes())
        yield bed
    finally:
        bed.stop()


@contextlib.contextmanager
def ungated_meanwhile(bed: Testbed) -> Iterator[None]:
    """Pods created meanwhile reach kube-scheduler ungated: the gate webhook is taken away, then back.

    The one way a test on the session's bed leaves the shipped configuration. With admission gates on,
    the release pass keeps a group that cannot start away from kube-scheduler, so the extender's own
    verdicts (its ``filter`` reasons in ``FailedScheduling`` events, its saved decisions, its holds and
    wake-ups) are met only by pods created while the gate webhook is down (``failurePolicy: Ignore``:
    created ungated, as here) or by a group released just before the cluster changed. A test about those
    uses this (or the ``ungated`` fixture) and says why in its docstring.
    """
    bed.set_admission_gate(enabled=False)
    try:
        wait_for("pods created ungated", lambda: not _created_gated(bed), timeout=30)
        yield
    finally:
        bed.set_admission_gate(enabled=True)
        wait_for("pods created gated again", lambda: _created_gated(bed), timeout=30)


@pytest.fixture
def ungated(testbed: Testbed) -> Iterator[None]:
    """The whole test runs ``ungated_meanwhile``: its pods reach kube-scheduler ungated."""
    with ungated_meanwhile(testbed):
        yield


def _created_gated(bed: Testbed) -> bool:
    """Whether a phalanx pod created now would carry the admission gate (a dry run: nothing is stored)."""
    probe = gpu_pod("gate-probe", 1)
    created = bed.http.request("POST", "/api/v1/namespaces/default/pods", query={"dryRun": "All"}, body=probe)
    return any(g.get("name") == ADMISSION_GATE for g in created["spec"].get("schedulingGates") or [])


def why(bed: Testbed, *args: str) -> subprocess.CompletedProcess[str]:
    """Run ``phalanx why ARGS`` against the test bed."""
    argv = [sys.executable, "-m", "cli", "--kubeconfig", str(bed.kubeconfig), "why", *args]
    return subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=120, check=False)


def why_json(bed: Testbed, *args: str) -> dict[str, Any]:
    """``phalanx why ARGS -o json``, decoded; the table is printed for the report."""
    done = why(bed, *args, "-o", "json")
    assert done.returncode == 0, done.stderr
    answer: dict[str, Any] = orjson.loads(done.stdout)
    print(why(bed, *args).stdout)  # the table, for the report
    return answer


_names = count()


@pytest.fixture
def namespace(testbed: Testbed) -> Iterator[str]:
    """A fresh namespace; its pods are deleted afterwards so every test starts with free GPUs."""
    name = f"e2e-{next(_names)}"
    ensure_namespace(testbed.http, name)
    yield name
    delete_pods(testbed.http, name, timeout=30)


@pytest.fixture(scope="session")
def operator(testbed: Testbed) -> Iterator[Testbed]:
    """The session's test bed with the MPI Operator running, from the first test that asks to the end.

    Once per session: left running, it acts only on MPIJobs. It runs in a network namespace of its own
    (``Testbed.start_mpi_operator``), so another test bed's operator on the machine does not matter.
    """
    testbed.start_mpi_operator()
    yield testbed
    testbed.stop_mpi_operator()


@contextlib.contextmanager
def deleted_after(bed: Testbed, namespace: str, name: str) -> Iterator[None]:
    """Delete the MPIJob afterwards; the garbage collector deletes its pods, Job and PodGroup."""
    try:
        yield
    finally:
        with contextlib.suppress(NotFoundError):
            bed.http.request("DELETE", f"/apis/kubeflow.org/v2beta1/namespaces/{namespace}/mpijobs/{name}")
        wait_for("the job's pods deleted", lambda: not list_pods(bed.http, namespace), timeout=60)


def operator_stall(log: str, key: str) -> str | None:
    """Why the MPI Operator is not acting on MPIJob ``key``, read from ``log`` (its log over a wait).

    The operator (v0.7.0, as v0.8.0) enqueues every event on a job rate-limited: each one doubles the
    job's next delay (5 ms x 2^events, up to 1,000 s) until a sync succeeds, so a sync that fails after
    a burst of events leaves the job waiting minutes (docs/elastic-mpijobs.md, "Limits today"). A wait
    in which the job's last sync failed, or none finished, is the operator's to explain.
    """
    syncs = [
        line
        for line in log.splitlines()
        if f"error syncing '{key}'" in line or f"Successfully synced '{key}'" in line
    ]
    if not syncs:
        return "no sync of it finished"
    return f"its last sync failed: {syncs[-1][-200:]}" if "error syncing" in syncs[-1] else None


def wait_for_operator(
    bed: Testbed,
    keys: str | tuple[str, ...],
    what: str,
    probe: Callable[[], T | None],
    *,
    timeout: float,
    interval: float = 0.2,
    describe: Callable[[], object] = lambda: None,
) -> T:
    """``wait_for`` something only the MPI Operator's syncs of the jobs ``keys`` bring.

    If it times out while the operator is not acting on one of them (``operator_stall``), the wait is
    not phalanx's: the operator's goroutines are dumped to its log (SIGQUIT), the ones in its
    job controller printed, and the operator started again, as its failover would; then the wait is
    made once more. Any other timeout fails, with ``describe()``'s picture of the job.
    """
    log = bed.logs / "mpi-operator.log"
    mark = log.stat().st_size
    try:
        return wait_for(what, probe, timeout=timeout, interval=interval)
    except AssertionError as timed_out:
        with log.open("rb") as handle:
            handle.seek(mark)
            text = handle.read().decode(errors="replace")
        named = (keys,) if isinstance(keys, str) else keys
        stall = "; ".join(f"{key}: {why}" for key in named if (why := operator_stall(text, key)))
        if not stall:
            msg = f"{timed_out}; now: {describe()!r}"
            raise AssertionError(msg) from timed_out
    print(f"\nthe MPI Operator is not acting ({stall}) after {timeout:.0f}s; now: {describe()!r}")
    mark = log.stat().st_size
    bed.stop_mpi_operator(signal.SIGQUIT)
    with log.open("rb") as handle:
        handle.seek(mark)
        dump = handle.read().decode(errors="replace").split("\n\n")
    mine = sorted((g for g in dump if "mpi_job_controller" in g), key=lambda g: "syncHandler" not in g)
    print("its job controller's goroutines, syncs first:", *[g[:1500] for g in mine[:4]], sep="\n")
    bed.start_mpi_operator()
    try:
        return wait_for(f"{what}, the MPI Operator restarted", probe, timeout=timeout, interval=interval)
    except AssertionError as timed_out:
        msg = f"{timed_out}; now: {describe()!r}"
        raise AssertionError(msg) from timed_out


@pytest.fixture
def queues(testbed: Testbed) -> Iterator[None]:
    """A (quota 8, weight 1, limit 12), B (quota 8, weight 1), C (quota 0, weight 2) on 24 GPUs."""
    for body in (
        queue("a", quota=8, weight=1, limit=12),
        queue("b", quota=8, weight=1),
        queue("c", quota=0, weight=2),
    ):
        create_queue(testbed.http, body)
    yield
    for name in ("a", "b", "c"):
        with contextlib.suppress(NotFoundError):
            testbed.http.request("DELETE", f"{QUEUES}/{name}")


def gang(
    testbed: Testbed, namespace: str, name: str, queue_name: str, *, pods: int = 2, gpus: int = 2
) -> None:
    create_podgroup(testbed.http, namespace, podgroup(name, pods))
    for i in range(pods):
        pod = member(f"{name}-{i}", name, gpus)
        pod["metadata"]["labels"]["phalanx.io/queue"] = queue_name
        create_pod(testbed.http, namespace, pod)


def bound_gangs(testbed: Testbed, namespace: str) -> dict[str, int]:
    counts: dict[str, int] = {}
    for pod in list_pods(testbed.http, namespace):
        group = pod["metadata"].get("labels", {}).get("scheduling.x-k8s.io/pod-group")
        if group:
            counts.setdefault(group, 0)
            if live(pod) and not pod["metadata"].get("deletionTimestamp"):
                counts[group] += 1
    return counts


PRIORITY_CLASSES = "/apis/scheduling.k8s.io/v1/priorityclasses"


@contextlib.contextmanager
def priority_classes(bed: Testbed, values: Mapping[str, int]) -> Iterator[None]:
    """These PriorityClasses (name: value) while the block runs, deleted afterwards."""
    for name, value in values.items():
        body = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name}}
        bed.http.request("POST", PRIORITY_CLASSES, body={**body, "value": value})
    try:
        yield
    finally:
        for name in values:
            with contextlib.suppress(NotFoundError):
                bed.http.request("DELETE", f"{PRIORITY_CLASSES}/{name}")


def preempted(bed: Testbed, namespace: str) -> list[str]:
    """The pods of ``namespace`` preempted, by name (kube-scheduler may report one pod twice)."""
    query = {"fieldSelector": "reason=Preempted"}
    events = bed.http.request("GET", f"/api/v1/namespaces/{namespace}/events", query=query).get("items") or []
    return sorted({str(e["involvedObject"]["name"]) for e in events})
