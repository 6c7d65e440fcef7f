"""The ``phalanx`` tool on the real control plane: every subcommand's JSON against the state read back.

One state, built by the real scheduler path: queues a, b, c (the ``queues`` fixture); a 2x4-GPU gang of
queue a running; a 3-GPU pod of queue b running; a 2x8-GPU gang of queue b waiting, since no two nodes
have 8 GPUs free. Each subcommand runs as a user runs it (``python -m cli``, the console scripts' code,
in a subprocess) and its JSON is checked against the objects the API server holds, what the placement
manager wrote and the Events the extender and kube-scheduler wrote. Then ``snapshot save`` and
``replay`` reproduce offline the sentence the extender turned the waiting gang down with.

The running pods go through the admission gates, as shipped; the waiting gang is created while the gate
webhook is away (``ungated``), as while it is down: kept gated, it would never reach kube-scheduler and
the extender, and ``replay`` is checked here against what they said (``FailedScheduling``, the
extender's saved decision).
"""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from localbed import Testbed
from workload import (
    create_pod,
    events_for,
    get_pod,
    get_podgroup,
    get_queue,
    gpu_pod,
    gpus_of,
    list_pods,
    live,
    running,
    said,
    wait_for,
)

from scheduling.model import GATE_STAMP
from scheduling.topology import from_json
from tests.conftest import REPO
from tests.e2e.conftest import gang, ungated_meanwhile

NEEDS = "needs 16 GPUs for 2 pods (8 per pod); 8 free on 1 node, at most 8 on one node"


def phalanx(bed: Testbed, *args: str) -> str:
    """Run ``python -m cli ARGS`` against the test bed; return its stdout (it must succeed)."""
    done = subprocess.run(
        [sys.executable, "-m", "cli", "--kubeconfig", str(bed.kubeconfig), *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, f"phalanx {' '.join(args)} exited {done.returncode}: {done.stderr}"
    print(f"$ phalanx {' '.join(args)}\n{done.stdout}{done.stderr}")
    return done.stdout


def items(bed: Testbed, *args: str) -> list[dict[str, Any]]:
    document = json.loads(phalanx(bed, *args, "-o", "json"))
    found: list[dict[str, Any]] = document["items"]
    return found


def build_state(bed: Testbed, namespace: str) -> str:
    """Create the state; return the sentence the extender turned the waiting gang down with."""
    gang(bed, namespace, "train", "a", pods=2, gpus=4)
    wait_for("train runs", lambda: sum(running(p) for p in list_pods(bed.http, namespace)) == 2, timeout=60)
    solo = gpu_pod("solo", 3)
    solo["metadata"]["labels"] = {"phalanx.io/queue": "b"}
    create_pod(bed.http, namespace, solo)
    wait_for("solo runs", lambda: sum(running(p) for p in list_pods(bed.http, namespace)) == 3, timeout=60)
    assert said(bed.http, namespace, "train", "AdmissionReleased"), "train went through the gates"
    stamp = (get_pod(bed.http, namespace, "solo")["metadata"].get("annotations") or {}).get(GATE_STAMP)
    assert stamp == "answered", "solo went through the gate webhook (let in at its door: no event)"
    with ungated_meanwhile(bed):
        gang(bed, namespace, "big", "b", pods=2, gpus=8)

    def waiting() -> str | None:
        for event in events_for(bed.http, namespace, "big"):
            if event["reason"] == "GangWaiting" and NEEDS in event["message"]:
                return str(event["message"])
        return None

    sentence = wait_for("the extender turns big down", waiting, timeout=60)
    wait_for(
        "the placement manager's statuses",
        lambda: (
            get_podgroup(bed.http, namespace, "train").get("status", {}).get("phase") == "Running"
            and get_queue(bed.http, "b").get("status", {}).get("gpu", {}).get("pending") == 16
        ),
        timeout=30,
    )
    return sentence


def check_queues(bed: Testbed) -> None:
    rows = {row["name"]: row for row in items(bed, "queues")}
    for name in ("a", "b", "c"):
        queue = get_queue(bed.http, name)
        spec, status = queue["spec"]["resources"]["nvidia.com/gpu"], queue["status"]["gpu"]
        gpu = rows[name]["resources"]["nvidia.com/gpu"]
        assert (gpu["quota"], gpu["overQuotaWeight"], gpu["limit"]) == (
            spec["quota"],
            spec["overQuotaWeight"],
            spec.get("limit"),
        )
        written = (status["allocated"], status["deserved"], status["fairShare"], status["pending"])
        assert (gpu["allocated"], gpu["deserved"], gpu["fairShare"], gpu["pending"]) == written, name
    held = {q: 0 for q in ("a", "b", "c")}
    for pod in list_pods(bed.http):
        queue = pod["metadata"].get("labels", {}).get("phalanx.io/queue")
        if live(pod) and queue in held:
            held[queue] += len(gpus_of(pod))
    assert (
        {q: rows[q]["resources"]["nvidia.com/gpu"]["allocated"] for q in held}
        == held
        == {"a": 8, "b": 3, "c": 0}
    )
    assert rows["b"]["resources"]["nvidia.com/gpu"]["pending"] == 16
    assert rows["b"]["status"] == ["below quota, work waiting"]
    assert rows["a"]["status"] == [] and rows["c"]["status"] == []


def check_gangs(bed: Testbed, namespace: str, sentence: str) -> None:
    rows = {row["name"]: row for row in items(bed, "gangs", "-n", namespace)}
    assert set(rows) == {"train", "big"}
    train, big = rows["train"], rows["big"]
    assert train["phase"] == get_podgroup(bed.http, namespace, "train")["status"]["phase"] == "Running"
    assert (train["queue"], train["bound"], train["minMember"], train["reason"]) == ("a", 2, 2, None)
    assert (big["queue"], big["phase"], big["bound"], big["minMember"], big["members"]) == (
        "b",
        "Pending",
        0,
        2,
        2,
    )
    assert big["waitingSeconds"] is not None and big["waitingSeconds"] >= 0
    assert big["reason"] is not None and sentence in big["reason"]["message"]
    assert all(row["namespace"] == namespace for row in items(bed, "-n", namespace, "gangs"))


def free_islands(document: str, free: set[int]) -> list[list[int]]:
    """The free NVLink islands of a bridged-pair node, worked out from its pairs."""
    pairs = from_json(document).bridged_pairs()
    islands = [[a, b] for a, b in pairs if a in free and b in free]
    islands += [[g] for g in sorted(free) if not any(g in pair for pair in islands)]
    return sorted(islands, key=lambda island: (-len(island), island))


def check_nodes(bed: Testbed) -> None:
    rows = {row["name"]: row for row in items(bed, "nodes")}
    held: dict[str, dict[str, list[int]]] = {}
    for pod in list_pods(bed.http):
        if live(pod) and gpus_of(pod):
            key = f"{pod['metadata']['namespace']}/{pod['metadata']['name']}"
            held.setdefault(pod["spec"]["nodeName"], {})[key] = list(gpus_of(pod))
    nodes = bed.http.request("GET", "/api/v1/nodes")["items"]
    assert set(rows) == {n["metadata"]["name"] for n in nodes}
    for node in nodes:
        name, row = node["metadata"]["name"], rows[node["metadata"]["name"]]
        holders = {h["pod"]: h["gpus"] for h in row["holders"]}
        assert holders == held.get(name, {}), name
        taken = {g for gpus in holders.values() for g in gpus}
        total = int(node["status"]["allocatable"]["nvidia.com/gpu"])
        free = set(range(total)) - taken
        assert (row["gpus"]["total"], row["gpus"]["free"], row["gpus"]["freeIndices"]) == (
            total,
            len(free),
            sorted(free),
        )
        assert row["freeNvlinkIslands"] == free_islands(
            node["metadata"]["annotations"]["phalanx.io/gpu-topology"], free
        )
        assert row["ready"] and not row["cordoned"]
    assert sorted(row["gpus"]["free"] for row in rows.values()) == [0, 5, 8]


def saved_decision(bed: Testbed, pod: str) -> bytes | None:
    try:
        with urllib.request.urlopen(f"{bed.extender_url}/debug/decision?pod={pod}", timeout=10) as reply:
            body: bytes = reply.read()
            return body
    except urllib.error.HTTPError:
        return None


def check_snapshot_and_replay(bed: Testbed, namespace: str, sentence: str, tmp_path: Path) -> None:
    file = tmp_path / "cluster.json"
    phalanx(bed, "snapshot", "save", str(file))
    [replayed] = items(bed, "replay", str(file), "--pod", f"{namespace}/big-0")
    assert (replayed["askedPhalanx"], replayed["feasible"], replayed["verdict"]) == (True, [], sentence)
    full = {row["name"]: row["gpus"]["free"] for row in items(bed, "nodes")}
    empty = [n for n, free in full.items() if free == 8]
    assert replayed["rejected"] == [
        {
            "source": "kube-scheduler",
            "message": "Insufficient nvidia.com/gpu",
            "nodes": sorted(set(full) - set(empty)),
        },
        {"source": "phalanx", "message": sentence, "nodes": empty},
    ]
    failed = [
        e["message"] for e in events_for(bed.http, namespace, "big-0") if e["reason"] == "FailedScheduling"
    ]
    assert replayed["summary"] == f"0/3 nodes are available: 1 {sentence}, 2 Insufficient nvidia.com/gpu."
    assert any(m.startswith(replayed["summary"]) for m in failed), f"kube-scheduler said {failed}"
    every = items(bed, "replay", str(file))
    assert [r["pod"] for r in every if r["pod"].startswith(f"{namespace}/")] == [
        f"{namespace}/big-0",
        f"{namespace}/big-1",
    ]
    phalanx(bed, "replay", str(file), "--pod", f"{namespace}/big-1")

    decision = wait_for("the extender's saved decision", lambda: saved_decision(bed, f"{namespace}/big-0"))
    saved = tmp_path / "decision.json"
    saved.write_bytes(decision)
    [again] = items(bed, "replay", str(saved))
    assert again["matches"] and again["verdict"] == sentence


def test_every_subcommand_shows_the_real_state(
    testbed: Testbed, namespace: str, queues: None, tmp_path: Path
) -> None:
    sentence = build_state(testbed, namespace)
    check_queues(testbed)
    check_gangs(testbed, namespace, sentence)
    check_nodes(testbed)
    check_snapshot_and_replay(testbed, namespace, sentence, tmp_path)
    for command in ("queues", "nodes"):
        phalanx(testbed, command)
    phalanx(testbed, "gangs", "-n", namespace)
