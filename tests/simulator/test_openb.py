"""The openb readers on real rows, bad rows, the pod decisions, and a run on unlike nodes worked out by hand.

The rows below are real: nodes 0000, 0022, 0025 and 0143 of ``openb_node_list_gpu_node.csv``, node 0227
of ``openb_node_list_all_node.csv`` and pods of ``openb_pod_list_default.csv`` (``alibaba/clusterdata``,
``cluster-trace-gpu-v2023/csv``, commit 50a91c7c), pod 0035 as the folder's README shows it (with a
``gpu_spec``).
"""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest
from click.testing import CliRunner

from simulator.__main__ import main
from simulator.comparison import Comparison
from simulator.loop import Allocation, ClusterView, Mode, SimulationError, run
from simulator.openb import OpenbPod, read_nodes, read_pods, scale_nodes, to_jobs
from simulator.philly import RIGID, RigidSpeed
from simulator.policies.fifo import Fifo
from simulator.policies.phalanx import Phalanx
from simulator.policies.tiresias import Tiresias
from simulator.traces import TraceJob, WorkloadError

NODES = """sn,cpu_milli,memory_mib,gpu,model
openb-node-0000,64000,262144,2,P100
openb-node-0022,128000,786432,8,G3
openb-node-0025,32000,131072,4,V100M16
openb-node-0143,8000,32768,1,V100M16
openb-node-0227,32000,262144,0,
"""
POD_HEADER = (
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,"
    "scheduled_time\n"
)
PODS = POD_HEADER + (
    "openb-pod-0002,12000,24576,1,1000,,LS,Running,1558381,12902960,1558381\n"
    "openb-pod-0005,20000,65536,0,0,,LS,Running,2759674,12902960,2759676\n"
    "openb-pod-0017,88000,327680,8,1000,,Burstable,Succeeded,9437497,10769854,9437497\n"
    "openb-pod-0022,4000,15258,1,220,,BE,Running,9679175,9973826,9679175\n"
    "openb-pod-0033,3152,5600,1,1000,,BE,Failed,9965463,9965645,9965463\n"
    "openb-pod-0035,16000,32768,1,1000,V100M16|V100M32,LS,Running,9967058,9968575,9967063\n"
    "openb-pod-0061,11908,47104,1,1000,,BE,Pending,10001278,10001403,\n"
)


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_reads_real_node_rows(tmp_path: Path) -> None:
    nodes = read_nodes(_write(tmp_path, "nodes.csv", NODES))
    assert [(n.sn, n.gpu, n.model) for n in nodes] == [
        ("openb-node-0000", 2, "P100"),
        ("openb-node-0022", 8, "G3"),
        ("openb-node-0025", 4, "V100M16"),
        ("openb-node-0143", 1, "V100M16"),
        ("openb-node-0227", 0, ""),
    ]
    assert (nodes[1].cpu_milli, nodes[1].memory_mib) == (128_000, 786_432)


def test_reads_real_pod_rows(tmp_path: Path) -> None:
    pods = read_pods(_write(tmp_path, "pods.csv", PODS))
    assert len(pods) == 7
    assert pods[5] == OpenbPod(
        name="openb-pod-0035",
        cpu_milli=16_000,
        memory_mib=32_768,
        num_gpu=1,
        gpu_milli=1000,
        gpu_spec=("V100M16", "V100M32"),
        qos="LS",
        pod_phase="Running",
        creation_time=9_967_058,
        deletion_time=9_968_575,
        scheduled_time=9_967_063,
    )
    assert (pods[6].pod_phase, pods[6].scheduled_time) == ("Pending", None)
    assert (pods[3].gpu_milli, pods[3].gpu_spec) == (220, ())


@pytest.mark.parametrize(
    ("row", "field", "problem"),
    [
        ("p,1,1,1,1200,,LS,Running,0,10,0", "gpu_milli", "1200 is above 1000"),
        ("p,1,1,2,500,,LS,Running,0,10,0", "gpu_milli", "only a one-GPU pod shares a GPU"),
        ("p,1,1,1,0,,LS,Running,0,10,0", "gpu_milli", "0 for a GPU pod"),
        ("p,1,1,-1,0,,LS,Running,0,10,0", "num_gpu", "-1 is below 0"),
        ("p,1,1,1,1000,,LS,Running,soon,10,0", "creation_time", "'soon' is not a number"),
        ("p,1,1,1,1000,,LS,Running,5,10,4", "scheduled_time", "4 is before creation_time 5"),
        ("p,1,1,1,1000,,LS,Running,5,6,7", "deletion_time", "6 is before scheduled_time"),
        ("p,1,1,1,1000,,,Running,5,6,5", "qos", "is empty"),
        ("openb-pod-0002,1,1,1,1000,,LS,Running,5,6,5", "name", "repeats line 2"),
    ],
)
def test_a_bad_pod_row_names_file_line_and_field(tmp_path: Path, row: str, field: str, problem: str) -> None:
    path = _write(tmp_path, "pods.csv", POD_HEADER + PODS.splitlines()[1] + "\n" + row + "\n")
    with pytest.raises(WorkloadError) as caught:
        read_pods(path)
    assert (caught.value.path, caught.value.line, caught.value.field) == (path, 3, field)
    assert problem in caught.value.problem
    assert str(caught.value).startswith(f"{path}:3: field {field!r}:")


def test_a_bad_node_row_names_file_line_and_field(tmp_path: Path) -> None:
    path = _write(tmp_path, "nodes.csv", NODES + "openb-node-9999,8000,32768,2,\n")
    with pytest.raises(WorkloadError, match=r"nodes.csv:7: field 'model': a node of 2 GPUs names no GPU"):
        read_nodes(path)
    missing = _write(tmp_path, "short.csv", "sn,cpu_milli,memory_mib,model\nn,1,1,T4\n")
    with pytest.raises(WorkloadError, match=r"short.csv:1: field 'gpu': column missing"):
        read_nodes(missing)


def test_pods_become_rigid_jobs_and_every_case_is_counted(tmp_path: Path) -> None:
    """Whole trace: 0005 is CPU-only and 0061 never ran; the other five are jobs in creation order.

    Durations are deletion less scheduled: 0002 12,902,960 - 1,558,381 (cut: the trace's last deletion);
    0022 asked 220 milli of a GPU for 294,651 s, so a whole GPU adds 0.78 x 294,651 = 229,827.78 GPU-s.
    """
    pods = read_pods(_write(tmp_path, "pods.csv", PODS))
    nodes = read_nodes(_write(tmp_path, "nodes.csv", NODES))
    jobs, counts = to_jobs(pods, nodes, (2, 8, 4, 1))
    assert [(j.name, j.time, j.num_replicas, j.duration) for j in jobs] == [
        ("openb-pod-0002", 1_558_381, 1, 11_344_579),
        ("openb-pod-0017", 9_437_497, 8, 1_332_357),
        ("openb-pod-0022", 9_679_175, 1, 294_651),
        ("openb-pod-0033", 9_965_463, 1, 182),
        ("openb-pod-0035", 9_967_058, 1, 1_512),
    ]
    assert {j.application for j in jobs} == {RIGID}
    assert (counts.nodes, counts.zero_gpu_nodes, counts.simulated_nodes) == (5, 1, 4)
    assert (counts.pods, counts.jobs, counts.cpu_only, counts.never_scheduled) == (7, 5, 1, 1)
    assert (counts.fractional, counts.fractional_added_gpu_s) == (1, 229_828)
    assert (counts.cut_at_trace_end, counts.gpu_spec_ignored, counts.too_large) == (1, 1, 0)


def test_a_window_rebases_times_and_a_pod_larger_than_every_node_is_left_out(tmp_path: Path) -> None:
    pods = read_pods(_write(tmp_path, "pods.csv", PODS))
    nodes = read_nodes(_write(tmp_path, "nodes.csv", NODES))
    jobs, counts = to_jobs(pods, nodes, (4, 2), start=9_437_000, end=9_970_000)
    assert [(j.name, j.time) for j in jobs] == [
        ("openb-pod-0022", 242_175),
        ("openb-pod-0033", 528_463),
        ("openb-pod-0035", 530_058),
    ]
    assert (counts.before_window, counts.after_window, counts.too_large) == (2, 1, 1)


def test_scaled_nodes_keep_the_mix() -> None:
    assert scale_nodes((8, 8, 8, 8, 2, 2, 2, 2), 0.25) == (8, 2)
    assert scale_nodes((8, 2), 0.01) == (8,)


# A run on a 4-GPU node (index 0) and a 2-GPU node (index 1): a (2 GPUs x 600 s) and b (4 GPUs x 300 s)
# arrive at 0; the first decision is at 60, every start costs 30 s, spanning one node more than the
# fewest costs 20 % (RigidSpeed).
UNLIKE = Mode(
    "unlike", nodes=2, gpus_per_node=4, step_seconds=60, restart_penalty_seconds=30, node_gpus=(4, 2)
)
JOBS = (
    TraceJob("a", 0, RIGID, 2, 1, duration=600),
    TraceJob("b", 0, RIGID, 4, 1, duration=300),
)


def _jcts(policy: Fifo | Tiresias | Phalanx) -> dict[str, int]:
    result = run(JOBS, policy, RigidSpeed(4), UNLIKE)
    return {job.name: job.jct for job in result.jobs}


def test_fifo_first_fit_splits_the_big_pod_over_both_nodes() -> None:
    """First fit puts a on the 4-GPU node; b no longer fits one node and takes 2 + 2 GPUs.

    a: 60 + 30 + 600 -> 690. b: 60 + 30 + 300 x 1.2 -> 450.
    """
    result = run(JOBS, Fifo(), RigidSpeed(4), UNLIKE)
    assert {job.name: job.jct for job in result.jobs} == {"a": 690, "b": 450}
    assert {job.name: job.compact for job in result.jobs} == {"a": True, "b": False}
    assert result.capacity == 6


def test_phalanx_keeps_each_pod_on_one_node() -> None:
    """The gang planner places a by best fit (the node left with least room: the 2-GPU one), so b fits whole.

    a: 60 + 30 + 600 -> 690. b: 60 + 30 + 300 -> 390.
    """
    assert _jcts(Phalanx(elastic=False)) == {"a": 690, "b": 390}


def test_tiresias_takes_the_most_free_node_first() -> None:
    """Job a takes 2 of the 4-GPU node (most free); b then takes 2 + 2 (tie, lowest index first): as FIFO."""
    assert _jcts(Tiresias()) == {"a": 690, "b": 450}


class _Overfill:
    name = "overfill"

    def initial(self) -> None:
        return None

    def minimum_gpus(self, job: TraceJob) -> int:
        return job.num_replicas

    def decide(self, state: None, view: ClusterView) -> tuple[None, dict[str, Allocation]]:
        return None, {"a": (1, 1, 1)}


def test_the_loop_refuses_more_gpus_than_a_small_node_has() -> None:
    with pytest.raises(SimulationError, match="put 3 GPUs on node 1"):
        run(JOBS, _Overfill(), RigidSpeed(4), UNLIKE)


def test_fewest_nodes_takes_the_largest_first() -> None:
    assert [UNLIKE.fewest_nodes(g) for g in (1, 4, 5, 6)] == [1, 1, 2, 2]


def test_openb_command_prints_the_counts_and_the_table(tmp_path: Path) -> None:
    nodes = _write(tmp_path, "nodes.csv", NODES)
    pods = _write(tmp_path, "pods.csv", PODS)
    args = ["openb", "--nodes", str(nodes), "--pods", str(pods), "--start", "9965000", "--hours", "1"]
    result = CliRunner().invoke(main, [*args, "--policy", "fifo,phalanx"])
    assert result.exit_code == 0, result.output
    assert "4 nodes (1 x 8, 1 x 4, 1 x 2, 1 x 1 GPUs), 15 GPUs" in result.output
    assert "2 simulated as jobs; left out: 0 CPU-only, 0 never scheduled" in result.output
    assert "gpu_spec not enforced on 1" in result.output
    # 0033: created 463 s into the window, starts at 480 (+30) and runs 182 s -> 692, JCT 229.
    # 0035: created 2,058 s in, starts at 2,100 (+30) and runs 1,512 s -> 3,642, JCT 1,584.
    assert "openb-pods: 4 nodes 15 GPUs, 60 s steps" in result.output
    out = CliRunner().invoke(main, [*args, "--policy", "fifo", "--json", "-"])
    comparison = msgspec.json.decode(out.output, type=Comparison)
    assert comparison.jct_s == {"fifo": {"openb-pod-0033": 229, "openb-pod-0035": 1584}}
    assert comparison.openb is not None
    assert comparison.openb.gpu_spec_ignored == 1
