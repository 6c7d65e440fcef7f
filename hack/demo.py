"""The demo: phalanx's story on a real control plane with simulated 8-GPU V100 nodes, in a few minutes.

Run ``hack/demo`` (it bootstraps first). Five chapters (``demo_story``): GPUs chosen by how they are
wired, a gang that binds all at once, two teams converging to their fair shares through one reclaim, an
elastic MPI job that grows, shrinks and is consolidated, and ``phalanx why`` on what cannot run.
``--keep`` leaves everything running and prints the commands to explore it; ``--only`` runs some chapters.
Each run starts clean: whatever a previous run left in its directory is stopped, then deleted
(``clear_previous``). Every port is free or its own: the MPI Operator, whose port 8080 is hard-coded,
runs in a network namespace of its own; where the machine allows none and another process holds 8080,
the demo names that process in one line and exits 2.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(1, str(Path(__file__).resolve().parents[1]))  # the checkout: testbed/ is not installed

from demo_story import NAMESPACE, Story, elastic, gang, queues, topology, why
from localbed import PortTakenError, Testbed, check_mpi_operator_port, own_network_namespace
from localcluster import ClusterError, LocalCluster
from rich.console import Console
from workload import ensure_namespace

from testbed.nodes import fleet, topology_from_file

REPO = Path(__file__).resolve().parents[1]
CUBE_MESH = REPO / "hack" / "topologies" / "v100-sxm2-8gpu-cubemesh_oneflow-dlperf-4x8v100.txt"
CHAPTERS = {"topology": topology, "gang": gang, "queues": queues, "elastic": elastic, "why": why}
NEEDS_MPI_OPERATOR = frozenset({"elastic"})


def clear_previous(directory: Path) -> None:
    """Stop every process a previous run left in ``directory``, then delete it.

    ``--keep`` leaves the control plane and the test bed's processes running; each recorded its pid
    (``LocalCluster.record_process``), so ``down`` stops exactly those before anything is deleted:
    deleting first would lose the records and orphan the processes.

    Raises:
        ClusterError: ``directory`` holds something that is not a cluster's state (left untouched).
    """
    LocalCluster(directory, log=lambda line: None).down(purge=True)


def main() -> int:
    """Run the demo."""
    parser = argparse.ArgumentParser(description="phalanx demo on the local control plane")
    parser.add_argument("--keep", action="store_true", help="leave the cluster running afterwards")
    parser.add_argument("--dir", type=Path, default=Path.home() / ".local/state/phalanx/demo")
    parser.add_argument(
        "--only",
        default=",".join(CHAPTERS),
        help=f"chapters to run, comma-separated (default: {','.join(CHAPTERS)})",
    )
    args = parser.parse_args()
    chosen = [c.strip() for c in args.only.split(",") if c.strip()]
    unknown = [c for c in chosen if c not in CHAPTERS]
    if unknown:
        parser.error(f"unknown chapter(s) {', '.join(unknown)}; choose from {', '.join(CHAPTERS)}")
    console = Console(highlight=False)
    try:
        clear_previous(args.dir)  # first: a previous run's operator may be what holds its port
        if NEEDS_MPI_OPERATOR & set(chosen) and not own_network_namespace():
            check_mpi_operator_port()  # before minutes of start-up, not after
        return run(args.dir, chosen, keep=args.keep, console=console)
    except (PortTakenError, ClusterError) as exc:
        console.print(f"[bold red]hack/demo:[/] {exc}", soft_wrap=True)
        return 2


def run(directory: Path, chosen: list[str], *, keep: bool, console: Console) -> int:
    """Start the test bed in ``directory``, tell the ``chosen`` chapters, stop it unless ``keep``."""
    bed = Testbed(directory, placement_grace=10.0, log=lambda line: None)
    started = time.monotonic()
    try:
        with console.status(
            "starting etcd, kube-apiserver, kube-scheduler, the extender, the placement manager"
        ):
            bed.start()
            bed.add_nodes(fleet(4, gpus=8, racks_per_zone=2, topology=topology_from_file(CUBE_MESH)))
            ensure_namespace(bed.http, NAMESPACE)
        console.print(
            f"[bold]phalanx[/] on a real control plane with 4 simulated 8 x V100 nodes, up in "
            f"{time.monotonic() - started:.1f}s (logs in {bed.logs})"
        )
        story = Story(bed, console, REPO)
        for name in chosen:
            CHAPTERS[name](story)
        console.rule(f"[bold]done in {time.monotonic() - started:.0f}s")
        if keep:
            phalanx = REPO / ".venv" / "bin" / "phalanx"
            console.print(f"left running. Explore it:\n  export KUBECONFIG={bed.kubeconfig}")
            for command in (
                "queues",
                "gangs",
                "nodes",
                f"why {NAMESPACE}/huge",
                f"why podgroup/llm -n {NAMESPACE}",
            ):
                console.print(f"  {phalanx} {command}")
            console.print(f"stop it with: hack/cluster down --dir {directory}")
            return 0
    finally:
        if not keep:
            bed.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
