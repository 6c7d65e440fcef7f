"""Building the local cluster's binaries from the pinned Go modules, once per source hash.

Five modules: ``hack/controlplane`` (etcd, kube-apiserver, kube-controller-manager, kube-scheduler,
kubectl: Kubernetes v1.36, k8s.io/* v0.36), ``hack/mpioperator`` (the Kubeflow MPI Operator v0.7.0,
which pins k8s.io/* v0.34, so it cannot share the control plane's module graph),
``hack/devicemanager`` (the test bed's kubelet device manager, our own ``main`` over the same v1.36.3
modules as the control plane, in a module of its own so that editing it never rebuilds the control
plane), ``hack/helm`` (the Helm v3 CLI that renders ``charts/phalanx``, with Helm's own k8s.io graph) and
the product's ``sidecar`` (kube-scheduler with phalanx's framework plugin, over the same v1.36.3 modules).
The binaries are built rather than downloaded so they are exactly the pinned releases, stamped
with their versions as the upstream release builds do; each module builds once per source hash into the
shared cache, under a lock, so concurrent callers build once.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from localcluster.errors import ClusterError, log_to_stderr
from localcluster.locations import REPO_ROOT, bin_dir, kubernetes_version, required_version, source_hash
from localcluster.processes import flock

BUILD_TARGETS: Mapping[str, str] = {
    "etcd": "./cmd/etcd",
    "kube-apiserver": "k8s.io/kubernetes/cmd/kube-apiserver",
    "kube-scheduler": "k8s.io/kubernetes/cmd/kube-scheduler",
    "kubectl": "k8s.io/kubernetes/cmd/kubectl",
    "kube-controller-manager": "k8s.io/kubernetes/cmd/kube-controller-manager",
}
"""Control plane binary name -> Go package, built in this order (etcd first: it compiles fastest)."""

MPI_OPERATOR_PACKAGE = "github.com/kubeflow/mpi-operator"
"""The MPI Operator's Go module; its ``cmd/mpi-operator`` is the stock operator binary."""

_VERSION_PACKAGES = ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version")
"""Packages whose ``-X`` variables carry the Kubernetes version (as in upstream's build)."""


def _version_ldflags(version: str) -> str:
    """Linker flags that stamp the Kubernetes version, as upstream's release build does.

    Without them the binaries report ``v0.0.0-master``, which breaks kubectl's version skew
    warning and anything that reads ``/version``.
    """
    match = re.match(r"v(\d+)\.(\d+)", version)
    if not match:
        msg = f"cannot parse Kubernetes version {version!r}"
        raise ClusterError(msg)
    major, minor = match.groups()
    values = {
        "gitVersion": version,
        "gitMajor": major,
        "gitMinor": minor,
        "gitTreeState": "clean",
        "gitCommit": "",
        "buildDate": "1970-01-01T00:00:00Z",
    }
    flags = ["-s", "-w"]
    for package in _VERSION_PACKAGES:
        flags += [f"-X {package}.{name}={value}" for name, value in values.items()]
    return " ".join(flags)


def _operator_ldflags(module_dir: Path) -> str:
    """Linker flags that stamp the operator's version (``mpi-operator --version``), as its Makefile does."""
    version = required_version(module_dir, MPI_OPERATOR_PACKAGE)
    return f"-s -w -X {MPI_OPERATOR_PACKAGE}/pkg/version.Version={version}"


@dataclasses.dataclass(frozen=True)
class GoModule:
    """One Go module under ``hack/`` and the binaries built from it."""

    directory: str
    """Its directory under ``hack/``; also its subdirectory of the cache."""
    targets: Mapping[str, str]
    """Binary name -> Go package, in build order."""
    ldflags: Callable[[Path], str]
    """Linker flags, from the module's directory (they stamp the pinned version)."""
    what: str
    """What the binaries are, for progress lines."""
    files: Mapping[str, tuple[str, str]] = dataclasses.field(default_factory=dict)
    """Files copied from a required module's source into the bin dir: name -> (module, path in it)."""
    parent: str = "hack"
    """The checkout directory holding it: ``hack`` for the test bed's, the root (``.``) for the product's."""

    def source(self, root: Path) -> Path:
        """Where the module is in the checkout at ``root``."""
        return root / self.parent / self.directory


CONTROL_PLANE = GoModule(
    "controlplane",
    BUILD_TARGETS,
    lambda source: _version_ldflags(kubernetes_version(source)),
    "the control plane",
)
MPI_OPERATOR = GoModule(
    "mpioperator",
    {"mpi-operator": f"{MPI_OPERATOR_PACKAGE}/cmd/mpi-operator"},
    _operator_ldflags,
    "the MPI Operator",
    {
        "kubeflow.org_mpijobs.yaml": (MPI_OPERATOR_PACKAGE, "manifests/base/kubeflow.org_mpijobs.yaml"),
        "cluster-role.yaml": (MPI_OPERATOR_PACKAGE, "manifests/base/cluster-role.yaml"),
    },
)
DEVICE_MANAGER = GoModule(
    "devicemanager",
    {"devicemanager": "."},
    # -checklinkname=0: the program reaches the device manager's unexported constructor (the one that
    # takes the socket path) with a go:linkname pull, which Go 1.23+ refuses without it.
    lambda source: "-s -w -checklinkname=0",
    "the kubelet device manager",
)
KUEUE_PACKAGE = "sigs.k8s.io/kueue"
"""Kueue's Go module; its ``cmd/kueue`` is the stock controller manager (admission, MultiKueue, webhooks)."""

KUEUE_CRDS = (
    "admissionchecks",
    "clusterqueues",
    "cohorts",
    "localqueues",
    "multikueueclusters",
    "multikueueconfigs",
    "provisioningrequestconfigs",
    "resourceflavors",
    "topologies",
    "workloadpriorityclasses",
    "workloads",
)
"""Kueue's CRDs (``config/components/crd/bases/kueue.x-k8s.io_<name>.yaml``), all installed: the
controller watches every one of them at start-up."""


def _kueue_ldflags(module_dir: Path) -> str:
    """Linker flags that stamp Kueue's version, as its Makefile does (``kueue --version``, its logs)."""
    version = required_version(module_dir, KUEUE_PACKAGE)
    return f"-s -w -X {KUEUE_PACKAGE}/pkg/version.GitVersion={version}"


KUEUE = GoModule(
    "kueue",
    {"kueue": f"{KUEUE_PACKAGE}/cmd/kueue"},
    _kueue_ldflags,
    "Kueue",
    {
        **{
            f"kueue.x-k8s.io_{crd}.yaml": (
                KUEUE_PACKAGE,
                f"config/components/crd/bases/kueue.x-k8s.io_{crd}.yaml",
            )
            for crd in KUEUE_CRDS
        },
        "webhooks.yaml": (KUEUE_PACKAGE, "config/components/webhook/manifests.yaml"),
    },
)
"""Built on demand only (``Testbed.start_kueue``): most work never needs it, and it takes minutes."""

HELM_PACKAGE = "helm.sh/helm/v3"
"""Helm's Go module; its ``cmd/helm`` is the stock Helm CLI that renders ``charts/phalanx``."""


def _helm_ldflags(module_dir: Path) -> str:
    """Linker flags that stamp Helm's version (``helm version``), as its Makefile does."""
    version = required_version(module_dir, HELM_PACKAGE)
    stamp = f"{HELM_PACKAGE}/internal/version"
    return f"-s -w -X {stamp}.version={version} -X {stamp}.gitTreeState=clean"


HELM = GoModule("helm", {"helm": f"{HELM_PACKAGE}/cmd/helm"}, _helm_ldflags, "the Helm CLI")
SIDECAR = GoModule(
    "sidecar",
    {"phalanx-scheduler": "./cmd/phalanx-scheduler"},
    lambda source: _version_ldflags(kubernetes_version(source)),
    "phalanx's framework sidecar (kube-scheduler with the PhalanxPlan plugin)",
    parent=".",
)
"""Part of the product, not of the test bed: ``sidecar/`` at the checkout's root."""
MODULES = (CONTROL_PLANE, MPI_OPERATOR, DEVICE_MANAGER, HELM, SIDECAR)
"""Every Go module ``build`` builds, in order (Kueue only on demand)."""


def _complete(directory: Path, module: GoModule) -> bool:
    """Whether ``directory`` holds every binary and file (a finished, renamed-into-place build)."""
    binaries = all(os.access(directory / name, os.X_OK) for name in module.targets)
    return binaries and all((directory / name).is_file() for name in module.files)


def _copy_files(go: str, module: GoModule, source: Path, env: Mapping[str, str], into: Path) -> None:
    """Copy ``module.files`` from the required modules' sources (in Go's module cache) into ``into``."""
    for name, (required, path) in module.files.items():
        result = subprocess.run(
            [go, "list", "-m", "-f", "{{.Dir}}", required],
            cwd=source,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            check=False,
        )
        origin = Path(result.stdout.strip()) / path
        if result.returncode != 0 or not result.stdout.strip() or not origin.is_file():
            msg = f"cannot find {path} of {required}: {result.stderr.strip() or origin}"
            raise ClusterError(msg)
        shutil.copyfile(origin, into / name)


def build(repo_root: Path | None = None, log: Callable[[str], None] = log_to_stderr) -> Path:
    """Build every module's binaries (control plane, MPI Operator, device manager, Helm) unless cached.

    Args:
        repo_root: The checkout whose ``hack/`` modules to build (default: this one).
        log: Receives one progress line per binary.

    Returns:
        The directory holding etcd, kube-apiserver, kube-controller-manager, kube-scheduler and
        kubectl (the operator's is ``bin_dir(hack/mpioperator)``, the device manager's
        ``bin_dir(hack/devicemanager)``, Helm's ``bin_dir(hack/helm)``).

    Raises:
        ClusterError: If Go is missing or a build fails (the compiler output is included).
    """
    root = repo_root or REPO_ROOT
    dirs = [build_module(module, module.source(root), log) for module in MODULES]
    return dirs[0]


def build_module(
    module: GoModule, module_dir: Path | None = None, log: Callable[[str], None] = log_to_stderr
) -> Path:
    """Build one module's binaries once per source hash and return their directory.

    A complete ``bin`` directory for the current hash means there is nothing to do. Otherwise
    the binaries are built into a temporary sibling that is renamed into place only when all
    of them succeeded, so an interrupted build never leaves a half-filled ``bin``.

    Args:
        module: Which module and binaries.
        module_dir: Where the module is (default: ``module.source`` of this checkout).
        log: Receives one progress line per binary.

    Returns:
        The directory holding the module's binaries.

    Raises:
        ClusterError: If Go is missing or a build fails (the compiler output is included).
    """
    source = (module_dir or module.source(REPO_ROOT)).resolve()
    target = bin_dir(source)
    if _complete(target, module):
        return target
    go = os.environ.get("GO") or shutil.which("go") or "/usr/local/go/bin/go"
    if not os.access(go, os.X_OK):
        msg = f"the Go toolchain ('go') is needed to build {module.what}"
        raise ClusterError(msg)
    hash_dir = target.parent
    with flock(hash_dir / ".build.lock", log, "the build"):
        if _complete(target, module):
            return target
        for stale in hash_dir.glob("bin.tmp.*"):
            shutil.rmtree(stale, ignore_errors=True)
        shutil.rmtree(target, ignore_errors=True)
        env = dict(os.environ)
        # Static binaries need no C toolchain. -mod=readonly: a build must never rewrite the
        # go.mod/go.sum it was hashed from; a missing go.sum entry is a bug to fix in git.
        env["CGO_ENABLED"] = "0"
        goflags = [f for f in env.get("GOFLAGS", "").split() if not f.startswith("-mod=")]
        env["GOFLAGS"] = " ".join([*goflags, "-mod=readonly"])
        ldflags = module.ldflags(source)
        tmp = Path(tempfile.mkdtemp(prefix="bin.tmp.", dir=hash_dir))
        tmp.chmod(0o755)  # mkdtemp makes it 0700
        started = time.monotonic()
        try:
            for name, package in module.targets.items():
                log(f"building {name} ({package}) ...")
                t0 = time.monotonic()
                result = subprocess.run(
                    [go, "build", "-trimpath", "-ldflags", ldflags, "-o", str(tmp / name), package],
                    cwd=source,
                    env=env,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT,
                    text=True,
                    check=False,
                )
                if result.returncode != 0:
                    msg = f"go build {package} failed:\n{result.stdout}"
                    raise ClusterError(msg)
                log(f"built {name} in {time.monotonic() - t0:.1f}s")
            _copy_files(go, module, source, env, tmp)
            info = {
                "module": module.directory,
                "source_hash": source_hash(source),
                "build_seconds": round(time.monotonic() - started, 1),
            }
            (tmp / "build-info.json").write_text(json.dumps(info, indent=2) + "\n")
            tmp.rename(target)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        log(f"{module.what} built in {time.monotonic() - started:.1f}s: {target}")
    return target
