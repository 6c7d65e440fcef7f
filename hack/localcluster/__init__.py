"""A real, local Kubernetes control plane for phalanx's end-to-end tests and demos.

The extender only means something next to a real kube-scheduler, so instead of faking the
scheduler's HTTP calls we build etcd, kube-apiserver, kube-controller-manager, kube-scheduler and
kubectl from their Go modules (``hack/controlplane``), and the Kubeflow MPI Operator from its own
(``hack/mpioperator``), and run them as plain processes on 127.0.0.1. Nothing runs in containers
and nothing is downloaded except Go modules from the module proxy.

Everything a cluster owns lives in one state directory (certificates, tokens, etcd data,
kubeconfigs, logs, pid files), and every port is picked free at start-up, so several clusters
(say the test suite and a demo) can run side by side.

Use it from the command line through ``hack/cluster`` (see ``hack/cluster --help``; it runs
``python3 hack/localcluster``) or import it::

    sys.path.insert(0, str(repo_root / "hack"))
    from localcluster import LocalCluster

    cluster = LocalCluster(tmp_dir, extender_url="http://127.0.0.1:9999")
    cluster.up()
    try:
        ...  # use cluster.kubeconfig, cluster.server, cluster.admin_token, cluster.ca_file
    finally:
        cluster.down()

Only the Python standard library and the ``openssl`` command line tool are used, so the script
runs before the project's own virtualenv exists.

Modules, in the order a cluster needs them: ``errors`` (``ClusterError``), ``locations`` (checkout,
binary cache, state directory), ``build`` (the Go build), ``processes`` (detached processes, ports,
probes, locks), ``pki`` (certificates, tokens, kubeconfigs), ``config`` (the rendered scheduler
configuration), ``startup`` (bringing components up in order), ``cluster`` (``LocalCluster``) and
``cli`` (``hack/cluster``). This module re-exports the names other code imports.
"""

from localcluster.build import (
    BUILD_TARGETS,
    CONTROL_PLANE,
    DEVICE_MANAGER,
    KUEUE,
    MODULES,
    MPI_OPERATOR,
    SIDECAR,
    GoModule,
    build,
    build_module,
)
from localcluster.cluster import COMPONENTS, ClusterStatus, LocalCluster, ProcessStatus
from localcluster.config import DEFAULT_EXTENDER_URL, KUBECONFIG_PLACEHOLDER, render_scheduler_config
from localcluster.errors import ClusterError
from localcluster.locations import (
    REPO_ROOT,
    bin_dir,
    cache_root,
    default_cluster_dir,
    kubernetes_version,
    source_hash,
)

__all__ = [
    "BUILD_TARGETS",
    "COMPONENTS",
    "CONTROL_PLANE",
    "DEFAULT_EXTENDER_URL",
    "DEVICE_MANAGER",
    "KUBECONFIG_PLACEHOLDER",
    "KUEUE",
    "MODULES",
    "MPI_OPERATOR",
    "REPO_ROOT",
    "SIDECAR",
    "ClusterError",
    "ClusterStatus",
    "GoModule",
    "LocalCluster",
    "ProcessStatus",
    "bin_dir",
    "build",
    "build_module",
    "cache_root",
    "default_cluster_dir",
    "kubernetes_version",
    "render_scheduler_config",
    "source_hash",
]
