"""The chapters of ``hack/demo``: each submits real objects to the test bed and narrates what phalanx did.

A chapter waits on the API server (never on a timer it trusts blindly), shows a live status line while
it waits, and ends with the facts read back: where pods landed, which GPUs, the events phalanx wrote.
Chapters clean up after themselves so that the next one starts with free GPUs.
"""

from __future__ import annotations

import contextlib
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from localbed import Testbed
from rich.console import Console
from rich.table import Table
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
    gpus_of,
    list_pods,
    live,
    member,
    podgroup,
    queue,
)

from kubeio.errors import NotFoundError
from kubeio.http import JsonObject
from kubeio.pins import pin_toleration
from scheduling.topology import from_json

T = TypeVar("T")

NAMESPACE = "demo"
ROLE = "training.kubeflow.org/job-role"
TOPOLOGY_ANNOTATION = "phalanx.io/gpu-topology"


@dataclass
class Story:
    """What every chapter needs: the test bed, where to write, and the repository (for ``phalanx``)."""

    bed: Testbed
    console: Console
    repo: Path

    def say(self, text: str) -> None:
        """One narration line."""
        self.console.print(f"[bold cyan]»[/] {text}")

    def fact(self, text: str) -> None:
        """One line of what the cluster shows."""
        self.console.print(f"  [green]✓[/] {text}")

    def wait(self, what: str, probe: Callable[[], T | None], *, timeout: float = 90.0) -> T:
        """Poll ``probe`` until it returns something, with a live status line; fail after ``timeout``."""
        started = time.monotonic()
        with self.console.status(what) as status:
            while time.monotonic() - started < timeout:
                got = probe()
                if got is not None and got is not False:
                    return got
                status.update(f"{what} [dim]({time.monotonic() - started:.0f}s)[/]")
                time.sleep(0.2)
        msg = f"gave up after {timeout:.0f}s: {what}"
        raise TimeoutError(msg)

    def pods(self) -> list[JsonObject]:
        """The demo namespace's pods, not being deleted."""
        return [p for p in list_pods(self.bed.http, NAMESPACE) if not p["metadata"].get("deletionTimestamp")]

    def clean(self) -> None:
        """Delete the demo namespace's pods and PodGroups, and wait until their GPUs are free."""
        http = self.bed.http
        for pod in list_pods(http, NAMESPACE):
            with contextlib.suppress(NotFoundError):
                path = f"/api/v1/namespaces/{NAMESPACE}/pods/{pod['metadata']['name']}"
                http.request("DELETE", path, body={"gracePeriodSeconds": 0})
        groups = f"/apis/scheduling.x-k8s.io/v1alpha1/namespaces/{NAMESPACE}/podgroups"
        for group in http.request("GET", groups).get("items") or []:
            with contextlib.suppress(NotFoundError):
                http.request("DELETE", f"{groups}/{group['metadata']['name']}")
        self.wait("cleaning up", lambda: not list_pods(http, NAMESPACE), timeout=60)

    def chapter(self, title: str) -> None:
        """A chapter heading."""
        self.console.rule(f"[bold]{title}")


def _on(node: str, pod: JsonObject) -> JsonObject:
    pod["spec"]["nodeSelector"] = {"kubernetes.io/hostname": node}
    return pod


def topology(story: Story) -> None:
    """A 4-GPU trainer on a V100 cube mesh gets four GPUs that all talk over NVLink."""
    story.chapter("1. GPUs chosen by how they are wired")
    http, node = story.bed.http, "gpu-node-1"
    raw = http.request("GET", f"/api/v1/nodes/{node}")["metadata"]["annotations"][TOPOLOGY_ANNOTATION]
    doc = from_json(raw)
    story.say(
        f"{node} has 8 V100 SXM2 in a hybrid cube mesh (a real `nvidia-smi topo -m`, read by the node agent)"
    )
    create_pod(http, NAMESPACE, _on(node, gpu_pod("notebook", 1)))
    first = story.wait("notebook (1 GPU) binding", lambda: _bound(story, "notebook"))
    story.fact(f"notebook got GPU {_indices(first[1])} on {first[0]}")
    create_pod(http, NAMESPACE, _on(node, gpu_pod("trainer", 4)))
    node_name, chosen = story.wait("trainer (4 GPUs) binding", lambda: _bound(story, "trainer"))
    taken = set(first[1])
    naive = tuple(i for i in range(8) if i not in taken)[:4]
    story.fact(f"trainer got GPUs {_indices(chosen)} on {node_name}")
    table = Table("GPU set", "links between every pair", "pairs over NVLink")
    for label, gpus in (
        (f"phalanx's choice {_indices(chosen)}", chosen),
        (f"lowest free {_indices(naive)}", naive),
    ):
        links = [(a, b, doc.link(a, b)) for i, a in enumerate(gpus) for b in gpus[i + 1 :]]
        texts = ", ".join(f"{a}-{b} {link.kind if link else '?'}" for a, b, link in links)
        over_nv = sum(1 for _, _, link in links if link is not None and link.nvlinks)
        table.add_row(label, texts, f"{over_nv} of {len(links)}")
    story.console.print(table)
    story.say(
        "phalanx scores each GPU set by the bottleneck bandwidth of its graph: all-reduce avoids SYS links"
    )
    story.clean()


def _indices(gpus: tuple[int, ...]) -> str:
    return ",".join(map(str, gpus))


def _bound(story: Story, name: str) -> tuple[str, tuple[int, ...]] | None:
    pod = next((p for p in story.pods() if p["metadata"]["name"] == name), None)
    if pod is None or not pod["spec"].get("nodeName") or not gpus_of(pod):
        return None
    return str(pod["spec"]["nodeName"]), gpus_of(pod)


def gang(story: Story) -> None:
    """A gang of 4 waits whole while its members trickle in, then binds at once."""
    story.chapter("2. A gang binds all at once, or not at all")
    http = story.bed.http
    create_podgroup(http, NAMESPACE, podgroup("allreduce", 4))
    story.say("PodGroup allreduce wants 4 members of 4 GPUs; they are created one per second")
    with PodTimeline(http, NAMESPACE) as timeline:
        for i in range(4):
            create_pod(http, NAMESPACE, member(f"allreduce-{i}", "allreduce", 4))
            if i < 3:
                time.sleep(1.0)
            story.fact(f"{i + 1} of 4 members created, {len(timeline.bound_at)} bound")
        story.wait("the gang binding", lambda: len(timeline.bound_at) == 4)
        last_created = max(timeline.created_at.values())
        first, last = min(timeline.bound_at.values()), max(timeline.bound_at.values())
    nodes = sorted({str(p["spec"]["nodeName"]) for p in story.pods()})
    story.fact(
        f"all 4 bound {1000 * (last - last_created):.0f} ms after the last member was created, "
        f"within {1000 * (last - first):.0f} ms of each other, on {', '.join(nodes)}"
    )
    story.say("no member held GPUs while the gang was incomplete: nothing to deadlock, nothing half-started")
    story.clean()


def queues(story: Story) -> None:
    """Team A borrows the whole cluster; team B asks for its quota and gets it back by one reclaim."""
    story.chapter("3. Two teams share the cluster fairly")
    http = story.bed.http
    for name in ("team-a", "team-b"):
        create_queue(http, queue(name, quota=16, weight=1))
    story.say("queues team-a and team-b: quota 16 GPUs each, equal weights, on 32 GPUs")
    for i in range(2):
        _team_gang(story, f"a{i}", "team-a")
    story.wait("team-a's two gangs running", lambda: _allocated(story) == {"team-a": 32})
    story.fact("team-a runs 32 GPUs: 16 of them borrowed while team-b asks for nothing")
    _team_gang(story, "b0", "team-b")
    story.say("team-b submits one gang of 2 x 8 GPUs, within its quota")
    story.wait("team-b getting its quota back", lambda: _allocated(story) == {"team-a": 16, "team-b": 16})
    shown = story.wait("the queues' status catching up", lambda: _status_shows(story, 16, 16))
    for name, status in shown.items():
        story.fact(f"{name}: allocated {status.get('allocated')} GPUs, fair share {status.get('fairShare')}")
    for pod in ("a0-0", "a1-0"):
        for event in events_for(http, NAMESPACE, pod):
            if event["reason"] == "Reclaimed":
                story.fact(f"{pod}: Reclaimed: {event['message']}")
    story.clean()
    for name in ("team-a", "team-b"):
        with contextlib.suppress(NotFoundError):
            http.request("DELETE", f"{QUEUES}/{name}")


def _status_shows(story: Story, a: int, b: int) -> dict[str, JsonObject] | None:
    statuses = {
        name: story.bed.http.request("GET", f"{QUEUES}/{name}").get("status", {}).get("gpu", {})
        for name in ("team-a", "team-b")
    }
    held = (statuses["team-a"].get("allocated"), statuses["team-b"].get("allocated"))
    return statuses if held == (a, b) else None


def _team_gang(story: Story, name: str, team: str) -> None:
    create_podgroup(story.bed.http, NAMESPACE, podgroup(name, 2))
    for i in range(2):
        pod = member(f"{name}-{i}", name, 8)
        pod["metadata"]["labels"]["phalanx.io/queue"] = team
        create_pod(story.bed.http, NAMESPACE, pod)


def _allocated(story: Story) -> dict[str, int] | None:
    held: dict[str, int] = {}
    for pod in story.pods():
        if live(pod) and pod["spec"].get("nodeName"):
            team = pod["metadata"].get("labels", {}).get("phalanx.io/queue", "default")
            held[team] = held.get(team, 0) + len(gpus_of(pod))
    return held or None


@contextlib.contextmanager
def elastic_pool(story: Story, nodes: tuple[str, ...]) -> Iterator[None]:
    """``nodes`` labelled into the elastic pool for the chapter, and the label removed afterwards."""
    for node in nodes:
        _label(story, node, "true")
    try:
        yield
    finally:
        for node in nodes:
            _label(story, node, None)


def _label(story: Story, node: str, value: str | None) -> None:
    story.bed.http.request(
        "PATCH",
        f"/api/v1/nodes/{node}",
        body={"metadata": {"labels": {"phalanx.io/elastic-pool": value}}},
        content_type="application/merge-patch+json",
    )


def elastic(story: Story) -> None:
    """An elastic MPIJob grows into free GPUs, shrinks for a gang, and is consolidated onto one node."""
    story.chapter("4. An elastic MPI job grows, shrinks and is consolidated")
    bed, http = story.bed, story.bed.http
    story.say("starting the Kubeflow MPI Operator (the real one, built from its Go module)")
    bed.start_mpi_operator()
    pool = ("gpu-node-1", "gpu-node-2", "gpu-node-3", "gpu-node-4")
    with elastic_pool(story, pool):
        story.say(f"{', '.join(pool)} form the elastic pool: the placement manager pins workers there")
        create_mpijob(
            http,
            NAMESPACE,
            elastic_mpijob("bert", workers=2, gpus_per_worker=2, max_workers="6", min_available=3),
        )
        story.say("MPIJob bert: 2 workers of 2 GPUs, may grow to 6")
        story.wait("bert growing to 6 workers", lambda: len(_workers(story)) == 6 or None)
        story.fact(f"bert runs 6 workers ({_placement(story)}); the plan on the MPIJob: {_plan(story)}")
        create_podgroup(http, NAMESPACE, podgroup("wide", 3))
        for i in range(3):
            create_pod(http, NAMESPACE, member(f"wide-{i}", "wide", 8))
        story.say("a rigid gang of 3 x 8 GPUs arrives: it needs three whole nodes, two are free")
        story.wait("bert shrinking and the gang binding", lambda: _gang_bound(story, "wide"))
        story.fact(
            f"bert shrank to {len(_workers(story))} workers: {_placement(story)}; the gang bound whole"
        )
        for event in _job_events(story, "Resized"):
            story.fact(f"event Resized: {event}")
        for i in range(3):
            http.request(
                "DELETE", f"/api/v1/namespaces/{NAMESPACE}/pods/wide-{i}", body={"gracePeriodSeconds": 0}
            )
        http.request("DELETE", f"/apis/scheduling.x-k8s.io/v1alpha1/namespaces/{NAMESPACE}/podgroups/wide")
        story.say("the gang finishes")
        story.wait("bert growing back to 6", lambda: len(_workers(story)) == 6 or None)
        story.fact(f"bert is back at 6 workers ({_placement(story)})")
        _delete_job(story, "bert")
        _consolidate(story, pool)
    bed.stop_mpi_operator()


def _consolidate(story: Story, pool: tuple[str, ...]) -> None:
    http = story.bed.http
    for node, gpus in zip(pool, (4, 6, 6, 8), strict=True):
        blocker = _on(node, gpu_pod(f"busy-{node}", gpus))
        blocker["spec"]["tolerations"] = [pin_toleration(node)]
        create_pod(http, NAMESPACE, blocker)
    story.wait("other work filling most of each node", lambda: len(_bound_pods(story)) == 4 or None)
    create_mpijob(
        http, NAMESPACE, elastic_mpijob("gpt", workers=4, gpus_per_worker=2, max_workers="4", min_available=3)
    )
    story.say("MPIJob gpt (4 workers of 2 GPUs) starts while other work fills most of each node")
    story.wait("gpt's 4 workers running", lambda: len(_workers(story, "gpt")) == 4 or None)
    story.fact(f"gpt is spread over nodes ({_placement(story, 'gpt')})")
    for node in pool:
        http.request(
            "DELETE", f"/api/v1/namespaces/{NAMESPACE}/pods/busy-{node}", body={"gracePeriodSeconds": 0}
        )
    story.say(
        "the other work finishes: the placement manager moves gpt's workers together, fewest moves first"
    )
    story.wait("gpt on one node", lambda: _on_one_node(story, "gpt"), timeout=120)
    story.fact(f"gpt consolidated ({_placement(story, 'gpt')})")
    for event in _job_events(story, "Moved", "gpt"):
        story.fact(f"event Moved: {event}")
    _delete_job(story, "gpt")


def _workers(story: Story, job: str = "bert") -> list[JsonObject]:
    return [
        p
        for p in story.pods()
        if p["metadata"].get("labels", {}).get(ROLE) == "worker"
        and p["metadata"]["labels"].get("training.kubeflow.org/job-name") == job
        and p["spec"].get("nodeName")
        and p.get("status", {}).get("phase") == "Running"
    ]


def _placement(story: Story, job: str = "bert") -> str:
    """Where the job's running workers are, as "node: count" in node order."""
    counts: dict[str, int] = {}
    for pod in _workers(story, job):
        counts[str(pod["spec"]["nodeName"])] = counts.get(str(pod["spec"]["nodeName"]), 0) + 1
    return ", ".join(f"{node}: {n}" for node, n in sorted(counts.items()))


def _on_one_node(story: Story, job: str) -> bool:
    workers = _workers(story, job)
    return len(workers) == 4 and len({p["spec"]["nodeName"] for p in workers}) == 1


def _plan(story: Story) -> str:
    return str(
        get_mpijob(story.bed.http, NAMESPACE, "bert")["metadata"]
        .get("annotations", {})
        .get("phalanx.io/elastic-plan")
    )


def _gang_bound(story: Story, name: str) -> bool:
    members = [p for p in story.pods() if p["metadata"]["name"].startswith(f"{name}-")]
    return len(members) == 3 and all(p["spec"].get("nodeName") for p in members)


def _bound_pods(story: Story) -> list[str]:
    return [str(p["metadata"]["name"]) for p in story.pods() if p["spec"].get("nodeName")]


def _job_events(story: Story, reason: str, job: str = "bert") -> list[str]:
    query = {"fieldSelector": f"involvedObject.name={job},reason={reason}"}
    items = (
        story.bed.http.request("GET", f"/api/v1/namespaces/{NAMESPACE}/events", query=query).get("items")
        or []
    )

    def when(event: JsonObject) -> tuple[str, str]:
        return str(event.get("lastTimestamp") or event["metadata"].get("creationTimestamp")), str(
            event["metadata"]["name"]
        )

    return [str(e["message"]) for e in sorted(items, key=when)]


def _delete_job(story: Story, name: str) -> None:
    with contextlib.suppress(NotFoundError):
        story.bed.http.request("DELETE", f"/apis/kubeflow.org/v2beta1/namespaces/{NAMESPACE}/mpijobs/{name}")
    story.wait(f"{name}'s pods gone", lambda: not list_pods(story.bed.http, NAMESPACE), timeout=90)


def why(story: Story) -> None:
    """Something that cannot run, and ``phalanx why`` saying why in plain words."""
    story.chapter("5. Why is my job pending?")
    http = story.bed.http
    for i in range(3):
        create_pod(http, NAMESPACE, gpu_pod(f"job-{i}", 5))
    story.wait("three 5-GPU jobs running", lambda: len(_bound_pods(story)) == 3 or None)
    story.say("three 5-GPU jobs run, one per node: 17 GPUs stay free, but only one node has 8")
    create_podgroup(http, NAMESPACE, podgroup("llm", 2))
    for i in range(2):
        create_pod(http, NAMESPACE, member(f"llm-{i}", "llm", 8))
    create_pod(http, NAMESPACE, gpu_pod("huge", 16))
    story.say("then a 16-GPU pod (no node has 16) and a gang of 2 x 8 GPUs are submitted")
    story.wait(
        "the placement manager keeping them gated, each with its reason",
        lambda: _kept_gated(story, "huge") and _kept_gated(story, "llm"),
    )
    for target in ("demo/huge", "podgroup/llm"):
        story.console.print(
            f"[bold]$ phalanx why {target}{' -n demo' if target.startswith('podgroup') else ''}"
        )
        argv = [
            str(story.repo / ".venv/bin/phalanx"),
            "--kubeconfig",
            str(story.bed.kubeconfig),
            "why",
            target,
        ]
        if target.startswith("podgroup"):
            argv += ["-n", NAMESPACE]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
        story.console.print(done.stdout.rstrip() or done.stderr.rstrip())


def _kept_gated(story: Story, name: str) -> bool:
    """The release pass told ``name`` (a pod, or a gang's PodGroup) why it keeps it from kube-scheduler."""
    return any(e["reason"] == "AdmissionWaiting" for e in events_for(story.bed.http, NAMESPACE, name))
