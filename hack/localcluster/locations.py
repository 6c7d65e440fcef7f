"""Where things live: the checkout, the shared binary cache and the default cluster directory.

The binaries take many minutes to compile and depend only on the Go sources, so they live in a per-user
cache keyed by a hash of those sources, where every checkout and worktree can share them; a cluster's
own state lives in a directory of its own, so several clusters can run side by side. Each Go module
under ``hack/`` (``controlplane``, ``mpioperator``) has a cache directory of its own, named after it and
keyed by its own source hash, so changing one module never rebuilds the other.
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

from localcluster.errors import ClusterError

REPO_ROOT = Path(__file__).resolve().parents[2]
"""Root of the checkout this package lives in; the default source of go module and manifests."""


def cache_root() -> Path:
    """Return the per-user cache for built binaries.

    The binaries take many minutes to compile and depend only on the Go sources, so they are
    kept outside the repository where every checkout and worktree can share them.
    """
    explicit = os.environ.get("PHALANX_CACHE_DIR")
    if explicit:
        return Path(explicit)
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg) if xdg else Path.home() / ".cache"
    return base / "phalanx"


def default_cluster_dir() -> Path:
    """Return the default state directory (``$PHALANX_CLUSTER_DIR`` wins)."""
    explicit = os.environ.get("PHALANX_CLUSTER_DIR")
    if explicit:
        return Path(explicit)
    return Path.home() / ".local" / "state" / "phalanx" / "cluster"


def source_hash(controlplane_dir: Path) -> str:
    """Hash everything that decides what the binaries are: go.mod, go.sum and all Go files.

    Returns the first 16 hex digits of a SHA-256 over the relative path and content of each
    file, in sorted order, so renaming a file changes the hash as well as editing one.
    """
    files = [controlplane_dir / "go.mod", controlplane_dir / "go.sum"]
    files += sorted(p for p in controlplane_dir.rglob("*.go") if p.is_file())
    digest = hashlib.sha256()
    for path in files:
        data = path.read_bytes()
        rel = path.relative_to(controlplane_dir).as_posix()
        digest.update(f"{rel}\0{len(data)}\0".encode())
        digest.update(data)
    return digest.hexdigest()[:16]


def bin_dir(module_dir: Path | None = None) -> Path:
    """Return where the binaries of a Go module under ``hack/`` live (built or not).

    Args:
        module_dir: The module (default: ``hack/controlplane``); its directory name names the
            cache subdirectory, its source hash the version of it.
    """
    source = module_dir or REPO_ROOT / "hack" / "controlplane"
    return cache_root() / source.name / source_hash(source) / "bin"


def required_version(module_dir: Path, module: str) -> str:
    """Read the version of ``module`` that ``module_dir/go.mod`` requires, e.g. ``v1.36.3``."""
    text = (module_dir / "go.mod").read_text()
    pattern = rf"^\s*{re.escape(module)}\s+(v\d+\.\d+\.\d+\S*)"
    match = re.search(pattern, text, re.MULTILINE)
    if not match:
        msg = f"no {module} requirement in {module_dir / 'go.mod'}"
        raise ClusterError(msg)
    return match.group(1)


def kubernetes_version(controlplane_dir: Path) -> str:
    """Read the pinned ``k8s.io/kubernetes`` version from go.mod, e.g. ``v1.36.3``."""
    return required_version(controlplane_dir, "k8s.io/kubernetes")
