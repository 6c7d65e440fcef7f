"""FGD's packing experiment: each policy's rule on hand-worked nodes, the run's accounting, the command.

The command runs on the real openb rows quoted in ``tests/simulator/test_openb.py``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from simulator.__main__ import main
from simulator.openb import OpenbNode, read_pods
from simulator.packing import (
    CHECKPOINTS,
    Decisive,
    Free,
    Task,
    best_fit,
    draw,
    fragmentation,
    pack,
    policies,
    tasks_of,
)
from tests.simulator.test_openb import NODES, PODS


def node(name: str, gpus: int, cpu: int = 64000, memory: int = 262144) -> OpenbNode:
    return OpenbNode(name, cpu, memory, gpus, "G3")


def choose(policy_name: str, nodes: list[OpenbNode], task: Task, mix: list[Task]) -> str:
    free = Free(nodes)
    rule = policies(nodes, mix, 0)[policy_name]()
    return free.names[rule(task, free, free.fitting(task))]


TWO_GPU = Task(1000, 1024, 2)
ONE_GPU = Task(1000, 1024, 1)


def test_fgd_keeps_whole_the_node_the_mix_can_still_use_where_best_fit_fills_the_smallest() -> None:
    """A 1-GPU pod among 2-GPU pods: on the 2-GPU node it strands one GPU, on the 4-GPU node none."""
    nodes = [node("two", 2), node("four", 4)]
    mix = [TWO_GPU] * 9 + [ONE_GPU]
    assert choose("best-fit", nodes, ONE_GPU, mix) == "two"
    assert choose("fgd", nodes, ONE_GPU, mix) == "four"
    assert choose("worst-fit", nodes, ONE_GPU, mix) == "four"
    assert choose("first-fit", nodes, ONE_GPU, mix) == "two"


def test_fgd_counts_gpus_stranded_by_cpu_too() -> None:
    """Both nodes keep GPUs for the mix, but one would have too little CPU left for any of its pods."""
    nodes = [node("tight", 4, cpu=3000), node("roomy", 4, cpu=64000)]
    mix = [Task(2000, 1024, 1)] * 10
    assert (
        choose("best-fit", nodes, Task(2000, 1024, 1), mix) == "tight"
    )  # fewest GPUs left: a tie; least CPU
    assert choose("fgd", nodes, Task(2000, 1024, 1), mix) == "roomy"  # 'tight' would strand its 3 GPUs


def test_a_run_accounts_for_every_pod_and_gpu_and_the_draw_follows_the_seed() -> None:
    nodes = [node("a", 8), node("b", 4), node("c", 2), node("d", 1)]
    mix = [Task(4000, 8192, g) for g in (1, 1, 1, 2, 2, 4, 8)]
    arrivals = draw(mix, 15, 1.3, seed=3)
    assert sum(t.gpus for t in arrivals) >= 1.3 * 15 > sum(t.gpus for t in arrivals[:-1])
    assert draw(mix, 15, 1.3, seed=3) == arrivals and draw(mix, 15, 1.3, seed=4) != arrivals
    for name, make in policies(nodes, mix, 0).items():
        result = pack(nodes, arrivals, name, make())
        assert result.placed + result.refused == len(arrivals), name
        assert 0 <= result.unallocated <= 15, name
        allocated = [result.allocated[m] for m in CHECKPOINTS]
        assert allocated == sorted(allocated) and allocated[-1] <= 15 - result.unallocated, name


def test_phalanx_keeps_its_cluster_state_as_the_run_places_pods() -> None:
    """The decisive filter reads a cluster state fed every placement: its free GPUs are the run's."""
    nodes = [node("a", 8), node("b", 4), node("c", 2)]
    free, rule = Free(nodes), Decisive(nodes)
    for task in [ONE_GPU, TWO_GPU, ONE_GPU, Task(1000, 1024, 4), TWO_GPU]:
        fitting = free.fitting(task)
        free.take(rule(task, free, fitting), task)
    snapshot = rule._state.snapshot()
    assert [snapshot.usage_of(n.sn).requested.gpus for n in nodes] == list(np.array([8, 4, 2]) - free.gpus)


def test_a_fractional_pod_takes_a_whole_gpu_and_cpu_only_pods_are_left_out(tmp_path: Path) -> None:
    path = tmp_path / "pods.csv"
    path.write_text(PODS)
    assert sorted(t.gpus for t in tasks_of(read_pods(path))) == [1, 1, 1, 1, 1, 8]


def test_the_command_prints_every_policy_on_real_rows(tmp_path: Path) -> None:
    nodes, pods = tmp_path / "nodes.csv", tmp_path / "pods.csv"
    nodes.write_text(NODES)
    pods.write_text(PODS)
    out = tmp_path / "pack.json"
    args = ["openb-pack", "--nodes", str(nodes), "--pods", str(pods), "--until", "1.2", "--json", str(out)]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    assert "4 nodes, 15 GPUs" in result.output
    for name in ("phalanx", "fgd", "best-fit", "worst-fit", "first-fit", "random"):
        assert f"\n{name} " in result.output
    assert '"capacity_gpus":15' in out.read_text()


@pytest.mark.parametrize("policy", ["fastest", ""])
def test_an_unknown_policy_is_refused_with_the_choices(tmp_path: Path, policy: str) -> None:
    nodes, pods = tmp_path / "nodes.csv", tmp_path / "pods.csv"
    nodes.write_text(NODES)
    pods.write_text(PODS)
    result = CliRunner().invoke(
        main, ["openb-pack", "--nodes", str(nodes), "--pods", str(pods), "--policy", policy]
    )
    assert result.exit_code == 2 and "choose from phalanx, fgd" in result.output


def test_fragmentation_weighs_the_mix_by_how_often_each_kind_comes() -> None:
    """With mostly 1-GPU pods, stranding one GPU on a small node costs little: best-fit's choice stands."""
    nodes = [node("two", 2), node("four", 4)]
    mix = [ONE_GPU] * 99 + [TWO_GPU]
    assert choose("fgd", nodes, ONE_GPU, mix) == choose("best-fit", nodes, ONE_GPU, mix) == "two"
    assert best_fit(ONE_GPU, Free(nodes), np.array([0, 1])) == 0
    assert fragmentation(mix)(ONE_GPU, Free(nodes), np.array([0, 1])) == 0


def test_the_openb_replay_command_takes_the_same_file_options(tmp_path: Path) -> None:
    """``openb`` and ``openb-pack`` declare ``--nodes`` and ``--pods`` once (``openb_files``)."""
    nodes, pods = tmp_path / "nodes.csv", tmp_path / "pods.csv"
    nodes.write_text(NODES)
    pods.write_text(PODS)
    args = ["openb", "--nodes", str(nodes), "--pods", str(pods), "--policy", "fifo", "--drain-hours", "1"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    assert "4 nodes (1 x 8, 1 x 4, 1 x 2, 1 x 1 GPUs), 15 GPUs" in result.output
    missing = CliRunner().invoke(main, ["openb", "--nodes", str(nodes)])
    assert missing.exit_code == 2 and "--pods" in missing.output
