"""The command line of ``hack/cluster``: build, up, down, status, kubectl, paths.

A thin layer over ``LocalCluster`` and ``build``: it parses arguments, prints what shell scripts read
on stdout (the bin dir, the kubeconfig and an ``export KUBECONFIG=...`` line) and turns a
``ClusterError`` into a one-line message and exit status 1.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from localcluster.build import MODULES, build_module
from localcluster.cluster import LocalCluster
from localcluster.config import DEFAULT_EXTENDER_URL
from localcluster.errors import ClusterError
from localcluster.locations import REPO_ROOT, bin_dir


def _kubectl_main(argv: list[str]) -> int:
    """``cluster kubectl [--dir DIR] [--] ARGS``: exec kubectl with the cluster's kubeconfig."""
    state_dir: str | None = None
    while argv and (argv[0] == "--dir" or argv[0].startswith("--dir=")):
        if argv[0] == "--dir":
            if len(argv) < 2:
                print("cluster kubectl: --dir needs a value", file=sys.stderr)
                return 2
            state_dir, argv = argv[1], argv[2:]
        else:
            state_dir, argv = argv[0].split("=", 1)[1], argv[1:]
    if argv and argv[0] == "--":
        argv = argv[1:]
    cluster = LocalCluster(state_dir)
    kubectl = cluster.kubectl_path
    if not os.access(kubectl, os.X_OK):
        kubectl = cluster.build() / "kubectl"
    os.environ["KUBECONFIG"] = str(cluster.kubeconfig)
    os.execv(kubectl, [str(kubectl), *argv])


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``hack/cluster``; returns the process exit status."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    if args_list and args_list[0] == "kubectl":
        return _kubectl_main(args_list[1:])

    parser = argparse.ArgumentParser(
        prog="hack/cluster",
        description="Build and run a local Kubernetes control plane (etcd, kube-apiserver, "
        "kube-controller-manager, kube-scheduler) for phalanx.",
    )
    sub = parser.add_subparsers(dest="command", required=True)

    def with_dir(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
        p.add_argument(
            "--dir",
            type=Path,
            default=None,
            help="cluster state directory (default: $PHALANX_CLUSTER_DIR or ~/.local/state/phalanx/cluster)",
        )
        return p

    sub.add_parser(
        "build", help="build the binaries into the cache (if not there yet); print each module's bin dir"
    )
    up = with_dir(sub.add_parser("up", help="start the cluster (or keep a running one)"))
    up.add_argument(
        "--extender-url",
        default=DEFAULT_EXTENDER_URL,
        help=f"extender urlPrefix for the scheduler (default {DEFAULT_EXTENDER_URL})",
    )
    up.add_argument(
        "--scheduler-config",
        type=Path,
        default=None,
        help="KubeSchedulerConfiguration template (default manifests/scheduler-config.yaml)",
    )
    up.add_argument("--no-scheduler", action="store_true", help="start no kube-scheduler")
    up.add_argument(
        "--no-controller-manager",
        action="store_true",
        help="start no kube-controller-manager (Job controller, garbage collector)",
    )
    down = with_dir(sub.add_parser("down", help="stop the cluster's processes"))
    down.add_argument("--purge", action="store_true", help="also delete the state directory")
    with_dir(sub.add_parser("status", help="show processes; exit 0 iff all up and ready"))
    sub.add_parser("kubectl", help="run kubectl against the cluster: kubectl [--dir DIR] -- ARGS")
    sub.add_parser("paths", help="print the directory holding the built binaries")
    args = parser.parse_args(args_list)

    try:
        if args.command == "build":
            for module in MODULES:
                print(build_module(module, module.source(REPO_ROOT)))
        elif args.command == "paths":
            print(bin_dir())
        elif args.command == "up":
            cluster = LocalCluster(
                args.dir,
                args.extender_url,
                args.scheduler_config,
                run_scheduler=not args.no_scheduler,
                run_controller_manager=not args.no_controller_manager,
            )
            cluster.up()
            print(cluster.kubeconfig)
            print(f"export KUBECONFIG={cluster.kubeconfig}")
        elif args.command == "down":
            LocalCluster(args.dir).down(purge=args.purge)
        elif args.command == "status":
            status = LocalCluster(args.dir).status()
            for proc in status.processes:
                expected = proc.name in status.expected
                state = "running" if proc.running else ("stopped" if expected else "not used")
                print(f"{proc.name:<23} {state:<8} pid {proc.pid or '-':<8} port {proc.port or '-'}")
            print(
                f"{'apiserver':<23} {'ready' if status.apiserver_ready else 'not ready':<8} "
                f"{status.server or ''}"
            )
            return 0 if status.healthy else 1
    except ClusterError as err:
        print(f"hack/cluster {args.command}: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    return 0
