"""Building etcd, kube-apiserver, kube-scheduler and kubectl from the pinned Go modules, once per source hash.

The binaries are built rather than downloaded so the control plane is exactly the pinned Kubernetes
release (``hack/controlplane/go.mod``), stamped with its version as upstream's release build does; the
build runs once per source hash into the shared cache, under a lock, so concurrent callers build once.
"""

from __future__ import annotations

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
from localcluster.locations import REPO_ROOT, bin_dir, kubernetes_version, source_hash
from localcluster.processes import flock

BUILD_TARGETS: Mapping[str, str] = {
    "etcd": "./cmd/etcd",
    "kube-apiserver": "k8s.io/kubernetes/cmd/kube-apiserver",
    "kube-scheduler": "k8s.io/kubernetes/cmd/kube-scheduler",
    "kubectl": "k8s.io/kubernetes/cmd/kubectl",
}
"""Binary name -> Go package, built in this order (etcd first: it compiles fastest)."""

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


def _complete(directory: Path) -> bool:
    """Whether ``directory`` holds every binary (a finished, renamed-into-place build)."""
    return all(os.access(directory / name, os.X_OK) for name in BUILD_TARGETS)



def build(controlplane_dir: Path | None = None, log: Callable[[str], None] = log_to_stderr) -> Path:
    """Build the four binaries once per source hash and return their directory.

    A complete ``bin`` directory for the current hash means there is nothing to do. Otherwise
    the binaries are built into a temporary sibling that is renamed into place only when all
    of them succeeded, so an interrupted build never leaves a half-filled ``bin``.

    Args:
        controlplane_dir: The Go module to build (default: ``hack/controlplane``).
        log: Receives one progress line per binary.

    Returns:
        The directory holding etcd, kube-apiserver, kube-scheduler and kubectl.

    Raises:
        ClusterError: If Go is missing or a build fails (the compiler output is included).
    """
    source = (controlplane_dir or REPO_ROOT / "hack" / "controlplane").resolve()
    target = bin_dir(source)
    if _complete(target):
        return target
    go = os.environ.get("GO") or shutil.which("go") or "/usr/local/go/bin/go"
    if not os.access(go, os.X_OK):
        msg = "the Go toolchain ('go') is needed to build the control plane"
        raise ClusterError(msg)
    hash_dir = target.parent
    with flock(hash_dir / ".build.lock", log, "the build"):
        if _complete(target):
            return target
        for stale in hash_dir.glob("bin.tmp.*"):
            shutil.rmtree(stale, ignore_errors=True)
        shutil.rmtree(target, ignore_errors=True)
        version = kubernetes_version(source)
        env = dict(os.environ)
        # Static binaries need no C toolchain. -mod=readonly: a build must never rewrite the
        # go.mod/go.sum it was hashed from; a missing go.sum entry is a bug to fix in git.
        env["CGO_ENABLED"] = "0"
        goflags = [f for f in env.get("GOFLAGS", "").split() if not f.startswith("-mod=")]
        env["GOFLAGS"] = " ".join([*goflags, "-mod=readonly"])
        ldflags = _version_ldflags(version)
        tmp = Path(tempfile.mkdtemp(prefix="bin.tmp.", dir=hash_dir))
        tmp.chmod(0o755)  # mkdtemp makes it 0700
        started = time.monotonic()
        try:
            for name, package in BUILD_TARGETS.items():
                log(f"building {name} ({package}, Kubernetes {version}) ...")
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
            info = {
                "kubernetes": version,
                "source_hash": source_hash(source),
                "build_seconds": round(time.monotonic() - started, 1),
            }
            (tmp / "build-info.json").write_text(json.dumps(info, indent=2) + "\n")
            tmp.rename(target)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        log(f"control plane built in {time.monotonic() - started:.1f}s: {target}")
    return target

