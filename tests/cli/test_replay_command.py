"""``phalanx replay`` on files: a snapshot's waiting pods, a saved decision re-run, files it cannot read."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import orjson
import pytest

from cli.program import main
from scheduling.admission.queue_hold import AdmittedBook
from scheduling.cluster.promises import PromiseBook
from scheduling.cluster.snapshot import ClusterSnapshot
from scheduling.model import Node
from scheduling.offline.replay import save_filter
from scheduling.offline.snapshot_file import save_snapshot
from scheduling.session import FilterInput, SessionSettings, filter_pod
from scheduling.topology import TopologyCache
from tests.builders import a_gang, a_node, a_pod, snapshot_of
from tests.scheduling.queues.builders import gpu_queue
from tests.scheduling.topology.shared_files import document

CACHE = TopologyCache()
GANG = "gang ml/big: needs 16 GPUs for 2 pods (8 per pod); 8 free on 1 node, at most 8 on one node"
SAYS = f"0/3 nodes are available: 1 {GANG}, 2 Insufficient nvidia.com/gpu."


def bridged(name: str) -> Node:
    return replace(a_node(name).build(), topology=CACHE.topology(document("a6000-8")))


def cluster() -> ClusterSnapshot:
    pods = [
        *(
            a_pod(f"run-{i}").gpus(4).group("run").queue("a").on("n1", range(4 * i, 4 * i + 4)).build()
            for i in range(2)
        ),
        a_pod("solo").gpus(3).queue("b").on("n2", [0, 1, 2]).build(),
        *(a_pod(f"big-{i}").gpus(8).group("big").queue("b").build() for i in range(2)),
        a_pod("two").gpus(2).queue("c").build(),
    ]
    queues = [gpu_queue("a", 8, 1, 12), gpu_queue("b", 8), gpu_queue("c", 0, 2)]
    return snapshot_of(
        [bridged(f"n{i}") for i in (1, 2, 3)], pods, [a_gang("run", 2), a_gang("big", 2)], queues
    )


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    status = main(list(args))
    out, err = capsys.readouterr()
    return status, out, err


def test_a_snapshot_replays_every_waiting_pod_sorted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    file = tmp_path / "cluster.json"
    file.write_bytes(save_snapshot(cluster(), taken=1000.0))
    status, out, _ = run(capsys, "replay", str(file), "-o", "json")
    assert status == 0
    items = json.loads(out)["items"]
    assert [i["pod"] for i in items] == ["ml/big-0", "ml/big-1", "ml/two"]
    big = items[0]
    assert (big["group"], big["feasible"], big["verdict"]) == ("ml/big", [], GANG)
    assert big["rejected"] == [
        {"source": "kube-scheduler", "message": "Insufficient nvidia.com/gpu", "nodes": ["n1", "n2"]},
        {"source": "phalanx", "message": GANG, "nodes": ["n3"]},
    ]
    assert items[2]["feasible"] == ["n2", "n3"]
    status, table, _ = run(capsys, "-o", "table", "replay", str(file), "--pod", "ml/big-1")
    assert table.splitlines() == [
        "POD        NODES      WHY",
        "ml/big-1   (none)     no node passes",
        "           2: n1,n2   kube-scheduler: Insufficient nvidia.com/gpu",
        f"           1: n3      phalanx: {GANG}",
        f"                      verdict: {GANG}",
        f"                      kube-scheduler would say: {SAYS}",
    ]


def test_every_node_offers_phalanx_the_nodes_kube_scheduler_would_not(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    file = tmp_path / "cluster.json"
    file.write_bytes(save_snapshot(cluster(), taken=1000.0))
    _, out, _ = run(capsys, "replay", str(file), "--pod", "ml/big-0", "--every-node", "-o", "yaml")
    assert "13 free on 2 nodes" in out and "kube-scheduler" not in out


def decision(snapshot: ClusterSnapshot) -> bytes:
    pod = snapshot.pod("ml", "big-0")
    assert pod is not None
    asked = FilterInput(pod, ("n3",), snapshot, PromiseBook(), None, AdmittedBook(), 5.0)
    settings = SessionSettings()
    return save_filter(asked, filter_pod(asked, topologies=CACHE, settings=settings), settings)


def test_a_saved_decision_replays_to_the_same_answer(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    file = tmp_path / "decision.json"
    file.write_bytes(decision(cluster()))
    status, out, _ = run(capsys, "replay", str(file), "-o", "json")
    [item] = json.loads(out)["items"]
    assert status == 0
    assert (item["pod"], item["matches"], item["verdict"]) == ("ml/big-0", True, GANG)
    assert item["saved"]["verdict"] == GANG
    status, table, _ = run(capsys, "replay", str(file))
    assert table.splitlines()[1].split(None, 2)[2] == "saved: no node passes"
    assert table.splitlines()[-1].strip() == "replayed: the same decision"


def test_a_tampered_decision_replays_differently_and_exits_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    body = orjson.loads(decision(cluster()))
    for pod in [body["pod"], *body["cluster"]["pods"]]:
        if pod["name"].startswith("big-"):
            pod["requests"]["gpus"] = 4
    file = tmp_path / "decision.json"
    file.write_bytes(orjson.dumps(body))
    status, out, _ = run(capsys, "replay", str(file))
    assert status == 1
    lines = [line.strip() for line in out.splitlines()]
    different = lines.index("replayed: a DIFFERENT decision:")
    assert f"verdict: {GANG}" in lines[:different], "the saved verdict comes first"
    assert "verdict: gang ml/big: 2 pods reserved on 1 nodes (n3)" in lines[different:]


@pytest.mark.parametrize(
    ("content", "args", "error"),
    [
        (b"{}", (), "saved file has format None"),
        (b"garbage", (), "not a saved phalanx decision or snapshot"),
        (None, ("--pod", "ml/solo"), "pod ml/solo is already bound to node n2"),
        ("decision", ("--pod", "ml/other"), "holds the decision for ml/big-0 only"),
    ],
    ids=["no-format", "not-json", "bound-pod", "other-pod"],
)
def test_files_that_cannot_be_replayed_exit_2_with_the_reason(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    content: bytes | str | None,
    args: tuple[str, ...],
    error: str,
) -> None:
    file = tmp_path / "f.json"
    if content is None:
        file.write_bytes(save_snapshot(cluster(), taken=1.0))
    elif content == "decision":
        file.write_bytes(decision(cluster()))
    else:
        assert isinstance(content, bytes)
        file.write_bytes(content)
    status, out, err = run(capsys, "replay", str(file), *args)
    assert (status, out) == (2, "")
    assert error in err and "Traceback" not in err
