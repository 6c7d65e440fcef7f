#!/usr/bin/env python3
"""A real, local Kubernetes control plane for phalanx's end-to-end tests and demos.

The extender only means something next to a real kube-scheduler, so instead of faking the
scheduler's HTTP calls we build etcd, kube-apiserver, kube-scheduler and kubectl from their Go
modules (``hack/controlplane``) and run them as plain processes on 127.0.0.1. Nothing runs in
containers and nothing is downloaded except Go modules from the module proxy.

Everything a cluster owns lives in one state directory (certificates, tokens, etcd data,
kubeconfigs, logs, pid files), and every port is picked free at start-up, so several clusters
(say the test suite and a demo) can run side by side.

Use it from the command line through ``hack/cluster`` (see ``hack/cluster --help``) or import
it::

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
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import dataclasses
import fcntl
import hashlib
import json
import os
import random
import re
import secrets
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
"""Root of the checkout this file lives in; the default source of go module and manifests."""

DEFAULT_EXTENDER_URL = "http://127.0.0.1:8888"
"""Where the scheduler looks for the extender unless told otherwise (matches the manifest)."""

KUBECONFIG_PLACEHOLDER = "KUBECONFIG_PATH"
"""Token in scheduler configs that stands for the scheduler's kubeconfig path."""

BUILD_TARGETS: Mapping[str, str] = {
    "etcd": "./cmd/etcd",
    "kube-apiserver": "k8s.io/kubernetes/cmd/kube-apiserver",
    "kube-scheduler": "k8s.io/kubernetes/cmd/kube-scheduler",
    "kubectl": "k8s.io/kubernetes/cmd/kubectl",
}
"""Binary name -> Go package, built in this order (etcd first: it compiles fastest)."""

COMPONENTS = ("etcd", "kube-apiserver", "kube-scheduler")
"""Processes a cluster runs, in start order (stopped in reverse)."""

SERVICE_CLUSTER_IP_RANGE = "10.0.0.0/24"
"""Virtual service range; nothing routes it, the apiserver just needs one to allocate from."""

SERVICE_ACCOUNT_ISSUER = "https://kubernetes.default.svc.cluster.local"

STOP_GRACE_SECONDS = 10.0
"""How long ``down`` waits after SIGTERM before it sends SIGKILL."""

_VERSION_PACKAGES = ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version")
"""Packages whose ``-X`` variables carry the Kubernetes version (as in upstream's build)."""


class ClusterError(RuntimeError):
    """Raised when the control plane cannot be built, started or stopped."""


def _stderr(message: str) -> None:
    """Default progress sink: stderr, so stdout stays machine-readable for the CLI."""
    print(message, file=sys.stderr, flush=True)


# --------------------------------------------------------------------------------------------
# Locations


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


def bin_dir(controlplane_dir: Path | None = None) -> Path:
    """Return where the binaries for the current Go sources live (built or not)."""
    source = controlplane_dir or REPO_ROOT / "hack" / "controlplane"
    return cache_root() / "controlplane" / source_hash(source) / "bin"


def kubernetes_version(controlplane_dir: Path) -> str:
    """Read the pinned ``k8s.io/kubernetes`` version from go.mod, e.g. ``v1.36.3``."""
    text = (controlplane_dir / "go.mod").read_text()
    match = re.search(r"^\s*k8s\.io/kubernetes\s+(v\d+\.\d+\.\d+\S*)", text, re.MULTILINE)
    if not match:
        msg = f"no k8s.io/kubernetes requirement in {controlplane_dir / 'go.mod'}"
        raise ClusterError(msg)
    return match.group(1)


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


@contextlib.contextmanager
def _flock(path: Path, log: Callable[[str], None], what: str) -> Iterator[None]:
    """Hold an exclusive advisory lock on ``path`` so concurrent builds/starts serialize."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+b") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            log(f"waiting for another process to finish {what} ({path})")
            fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def build(controlplane_dir: Path | None = None, log: Callable[[str], None] = _stderr) -> Path:
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
    with _flock(hash_dir / ".build.lock", log, "the build"):
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


# --------------------------------------------------------------------------------------------
# Processes


def _proc_stat(pid: int) -> tuple[str, int] | None:
    """Return (state, start time in clock ticks) of ``pid`` from /proc, or None if gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    # The command name (field 2) may contain spaces and parentheses; fields after it don't.
    fields = raw[raw.rfind(")") + 2 :].split()
    return fields[0], int(fields[19])  # field 3 (state) and field 22 (starttime)


def _alive(pid: int, start_time: int) -> bool:
    """Whether ``pid`` is still the very process we started (not a recycled pid, no zombie)."""
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)  # reap it if it is our exited child
    stat = _proc_stat(pid)
    return stat is not None and stat[0] not in ("Z", "X") and stat[1] == start_time


def _stop_process(pid: int, start_time: int, grace: float = STOP_GRACE_SECONDS) -> bool:
    """SIGTERM the process, SIGKILL it after ``grace`` seconds; return whether it was running."""
    if not _alive(pid, start_time):
        return False
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        if not _alive(pid, start_time):
            return True
        time.sleep(0.1)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 5
    while _alive(pid, start_time) and time.monotonic() < deadline:
        time.sleep(0.05)
    if _alive(pid, start_time):
        msg = f"process {pid} survived SIGKILL"
        raise ClusterError(msg)
    return True


def _ephemeral_range() -> tuple[int, int]:
    """Return the kernel's ephemeral port range (outgoing connections take ports from it)."""
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 32768, 60999


def _port_free(port: int) -> bool:
    """Whether a server could bind 127.0.0.1:``port`` right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as Go's listeners do
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _pick_port(preferred: int | None, taken: set[int]) -> int:
    """Pick a free loopback port, keeping ``preferred`` (last run's port) when it is free.

    Fresh ports come from below the ephemeral range: a port the kernel handed out for
    bind(0) can be grabbed by one of the apiserver's own outgoing connections before the
    server we meant it for binds it.
    """
    if preferred and preferred not in taken and _port_free(preferred):
        return preferred
    low, _ = _ephemeral_range()
    upper = max(low - 1, 20000)
    for _ in range(200):
        port = random.randint(10000, upper)
        if port not in taken and _port_free(port):
            return port
    msg = "could not find a free port on 127.0.0.1"
    raise ClusterError(msg)


def _tail(path: Path, lines: int = 40) -> str:
    """Return the last ``lines`` lines of a log file for error messages."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return "(no log)"
    return "\n".join(text.splitlines()[-lines:])


_NO_PROXY_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))
"""Talks to loopback directly even when the environment sets HTTP(S)_PROXY."""


def _http_get(
    url: str,
    *,
    token: str | None = None,
    context: ssl.SSLContext | None = None,
    timeout: float = 5.0,
) -> tuple[int, str]:
    """GET ``url``; return (status, body), with status 0 when nothing answered."""
    request = urllib.request.Request(url)
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    handlers: list[urllib.request.BaseHandler] = [urllib.request.ProxyHandler({})]
    if context is not None:
        handlers.append(urllib.request.HTTPSHandler(context=context))
    opener = urllib.request.build_opener(*handlers) if context is not None else _NO_PROXY_OPENER
    try:
        with opener.open(request, timeout=timeout) as response:
            return int(response.status), response.read().decode(errors="replace")
    except urllib.error.HTTPError as err:
        with err:  # an unclosed error response would raise ResourceWarning under pytest
            return err.code, err.read().decode(errors="replace")
    except (urllib.error.URLError, OSError):
        return 0, ""


def _write_private(path: Path, text: str) -> None:
    """Write a secret-bearing file atomically with mode 0600."""
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(text)
    tmp.replace(path)


def _run_openssl(*args: str) -> None:
    """Run one openssl command, turning failure into a ClusterError with its output."""
    if shutil.which("openssl") is None:
        msg = "the 'openssl' command is needed to create certificates"
        raise ClusterError(msg)
    result = subprocess.run(
        ["openssl", *args], stdin=subprocess.DEVNULL, capture_output=True, text=True, check=False
    )
    if result.returncode != 0:
        msg = f"openssl {' '.join(args[:2])} failed:\n{result.stderr}"
        raise ClusterError(msg)


# --------------------------------------------------------------------------------------------
# Scheduler configuration


def render_scheduler_config(text: str, kubeconfig: Path, extender_url: str) -> str:
    """Turn the project's scheduler config into the one a local scheduler runs with.

    Three edits, done on the text because the standard library has no YAML parser:
    ``KUBECONFIG_PATH`` (or, without that placeholder, the value of the first ``kubeconfig:``
    key) becomes the scheduler's kubeconfig, every extender ``urlPrefix``
    becomes ``extender_url`` and leader election is switched off (a single local scheduler
    has nobody to elect against and would otherwise need a Lease and wait for it).

    Args:
        text: The KubeSchedulerConfiguration YAML.
        kubeconfig: Path to put in ``clientConnection.kubeconfig``.
        extender_url: New ``urlPrefix`` for the extender(s).

    Returns:
        The rendered YAML.

    Raises:
        ClusterError: If the config has neither the placeholder nor a ``kubeconfig:`` key.
    """
    quoted = json.dumps(str(kubeconfig))  # a JSON string is a valid YAML scalar
    # Only outside comments; the optional quotes around the placeholder are replaced too.
    text, count = re.subn(
        r"""^([^#\n]*?)(["']?)\bKUBECONFIG_PATH\b\2""",
        lambda m: m.group(1) + quoted,
        text,
        flags=re.MULTILINE,
    )
    if count == 0:  # no placeholder: take over the first `kubeconfig:` key (e.g. "" = in-cluster)
        text, count = re.subn(
            r"^([ \t]*kubeconfig:)[ \t]*.*$",
            lambda m: m.group(1) + " " + quoted,
            text,
            count=1,
            flags=re.MULTILINE,
        )
    if count == 0:
        msg = f"scheduler config has no {KUBECONFIG_PLACEHOLDER} placeholder"
        raise ClusterError(msg)
    text = re.sub(
        r"^([ \t]*(?:-[ \t]+)?urlPrefix:[ \t]*)\S+",
        lambda m: m.group(1) + extender_url,
        text,
        flags=re.MULTILINE,
    )
    text, count = re.subn(
        r"^([ \t]*leaderElect:[ \t]*)\S+", lambda m: m.group(1) + "false", text, flags=re.MULTILINE
    )
    if count == 0:
        text, count = re.subn(
            r"^leaderElection:[ \t]*\n",
            "leaderElection:\n  leaderElect: false\n",
            text,
            count=1,
            flags=re.MULTILINE,
        )
    if count == 0:
        text = text.rstrip("\n") + "\nleaderElection:\n  leaderElect: false\n"
    return text


# --------------------------------------------------------------------------------------------
# Cluster


@dataclasses.dataclass(frozen=True)
class ProcessStatus:
    """One control-plane process as ``status`` sees it."""

    name: str
    running: bool
    pid: int | None
    port: int | None


@dataclasses.dataclass(frozen=True)
class ClusterStatus:
    """Snapshot of a cluster: its processes and whether the apiserver answers /readyz."""

    processes: tuple[ProcessStatus, ...]
    expected: tuple[str, ...]
    apiserver_ready: bool
    server: str | None

    @property
    def healthy(self) -> bool:
        """True iff every process this cluster should run is running and the API is ready."""
        running = {p.name for p in self.processes if p.running}
        return self.apiserver_ready and all(name in running for name in self.expected)


@dataclasses.dataclass
class _Started:
    """A process started by this object, with what is needed to stop exactly it."""

    name: str
    pid: int
    start_time: int


class LocalCluster:
    """etcd + kube-apiserver + kube-scheduler on loopback, with all state in one directory.

    Layout of ``state_dir``::

        state.json              ports, extender URL, whether a scheduler runs
        kubeconfig              admin (system:masters) kubeconfig, CA-verified TLS
        scheduler.kubeconfig    kubeconfig of user system:kube-scheduler
        scheduler-config.yaml   the rendered KubeSchedulerConfiguration
        pki/ auth/ etcd/        certificates and keys, static tokens, etcd data
        logs/<name>.log         stdout+stderr of each process (appended across restarts)
        pids/<name>.pid         JSON {"pid", "start_time", "port"}; start_time is field 22
                                of /proc/<pid>/stat so a recycled pid is never signalled

    The object keeps no state ``status``/``down`` need, so a cluster started by one process
    (``hack/cluster up``) can be inspected and stopped by another.
    """

    def __init__(
        self,
        state_dir: Path | str | None = None,
        extender_url: str = DEFAULT_EXTENDER_URL,
        scheduler_config: Path | str | None = None,
        repo_root: Path | str | None = None,
        *,
        run_scheduler: bool = True,
        scheduler_verbosity: int = 2,
        start_timeout: float = 120.0,
        log: Callable[[str], None] = _stderr,
    ) -> None:
        """Describe a cluster; nothing is started until :meth:`up`.

        Args:
            state_dir: Where the cluster keeps everything (default: ``default_cluster_dir()``).
            extender_url: The extender's ``urlPrefix`` the scheduler is pointed at.
            scheduler_config: KubeSchedulerConfiguration template (default: the repo's
                ``manifests/scheduler-config.yaml``).
            repo_root: Checkout providing ``hack/controlplane`` and ``manifests/``.
            run_scheduler: False starts only etcd and the apiserver.
            scheduler_verbosity: kube-scheduler ``-v`` (2 logs each scheduling attempt).
            start_timeout: Seconds each component gets to become ready.
            log: Receives progress lines (default: stderr).
        """
        self.state_dir = Path(state_dir or default_cluster_dir()).resolve()
        self.repo_root = Path(repo_root or REPO_ROOT).resolve()
        self.extender_url = extender_url
        self.scheduler_config = Path(
            scheduler_config or self.repo_root / "manifests" / "scheduler-config.yaml"
        ).resolve()
        self.run_scheduler = run_scheduler
        self.scheduler_verbosity = scheduler_verbosity
        self.start_timeout = start_timeout
        self.log = log

    # ---- paths and credentials

    @property
    def controlplane_dir(self) -> Path:
        """The Go module the binaries are built from."""
        return self.repo_root / "hack" / "controlplane"

    @property
    def bin_dir(self) -> Path:
        """Cache directory holding the binaries for the current sources."""
        return bin_dir(self.controlplane_dir)

    @property
    def kubectl_path(self) -> Path:
        """The cached kubectl binary."""
        return self.bin_dir / "kubectl"

    @property
    def kubeconfig(self) -> Path:
        """The admin kubeconfig (user ``admin`` in group ``system:masters``)."""
        return self.state_dir / "kubeconfig"

    @property
    def scheduler_kubeconfig(self) -> Path:
        """The kubeconfig kube-scheduler uses (user ``system:kube-scheduler``)."""
        return self.state_dir / "scheduler.kubeconfig"

    @property
    def ca_file(self) -> Path:
        """PEM CA that signed the apiserver's serving certificate."""
        return self.state_dir / "pki" / "ca.crt"

    @property
    def admin_token(self) -> str:
        """Bearer token of the admin user."""
        return self._tokens()["admin"]

    @property
    def ports(self) -> dict[str, int]:
        """Ports of the current (or last) run: etcd, etcd-peer, kube-apiserver, kube-scheduler."""
        return {k: int(v) for k, v in self._state().get("ports", {}).items()}

    @property
    def server(self) -> str:
        """The apiserver URL, ``https://127.0.0.1:<port>``."""
        port = self.ports.get("kube-apiserver")
        if not port:
            msg = f"no cluster has been started in {self.state_dir}"
            raise ClusterError(msg)
        return f"https://127.0.0.1:{port}"

    def _path(self, *parts: str) -> Path:
        return self.state_dir.joinpath(*parts)

    def _state(self) -> dict[str, Any]:
        try:
            data = json.loads(self._path("state.json").read_text())
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def _tokens(self) -> dict[str, str]:
        tokens: dict[str, str] = {}
        try:
            lines = self._path("auth", "tokens.csv").read_text().splitlines()
        except OSError:
            return tokens
        for line in lines:
            fields = line.split(",")
            if len(fields) >= 2:
                tokens[fields[1]] = fields[0]
        return tokens

    def ssl_context(self) -> ssl.SSLContext:
        """An SSL context that verifies the apiserver against this cluster's CA."""
        return ssl.create_default_context(cafile=str(self.ca_file))

    # ---- building

    def build(self) -> Path:
        """Build the binaries if the cache lacks them; return the bin directory."""
        return build(self.controlplane_dir, self.log)

    # ---- status

    def _read_pidfile(self, name: str) -> dict[str, int] | None:
        try:
            data = json.loads(self._path("pids", f"{name}.pid").read_text())
            return {
                "pid": int(data["pid"]),
                "start_time": int(data["start_time"]),
                "port": int(data.get("port") or 0),
            }
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def _apiserver_ready(self, timeout: float = 5.0) -> bool:
        try:
            context = self.ssl_context()
            status, body = _http_get(
                f"{self.server}/readyz", token=self.admin_token, context=context, timeout=timeout
            )
        except (ClusterError, OSError, ssl.SSLError, KeyError):
            return False
        return status == 200 and body.strip() == "ok"

    def status(self) -> ClusterStatus:
        """Report each process (running, pid, port) and whether the apiserver is ready."""
        processes = []
        for name in COMPONENTS:
            info = self._read_pidfile(name)
            if info is None:
                processes.append(ProcessStatus(name, False, None, self.ports.get(name)))
                continue
            running = _alive(info["pid"], info["start_time"])
            processes.append(ProcessStatus(name, running, info["pid"], info["port"] or None))
        apiserver_running = any(p.running for p in processes if p.name == "kube-apiserver")
        ready = apiserver_running and self._apiserver_ready()
        state = self._state()
        expected = tuple(c for c in COMPONENTS if c != "kube-scheduler" or state.get("run_scheduler", True))
        return ClusterStatus(tuple(processes), expected, ready, self.server if self.ports else None)

    # ---- starting

    def up(self) -> None:
        """Build if needed and start the control plane; a healthy running cluster is kept.

        Blocks until etcd is healthy, the apiserver's /readyz passes, the ``default``
        namespace exists, the CRDs in ``manifests/crds/`` are established and the scheduler's
        /healthz passes. On failure everything this call started is stopped again.

        Raises:
            ClusterError: If building or any start-up step fails; the message ends with the
                tail of the failing component's log.
        """
        bins = self.build()
        self.state_dir.mkdir(parents=True, exist_ok=True)
        with _flock(self._path(".lock"), self.log, "starting or stopping the cluster"):
            current = self.status()
            wanted = [c for c in COMPONENTS if c != "kube-scheduler" or self.run_scheduler]
            running = {p.name for p in current.processes if p.running}
            if current.apiserver_ready and all(c in running for c in wanted):
                state = self._state()
                if state.get("extender_url") != self.extender_url and self.run_scheduler:
                    self.log(
                        f"note: cluster already running; its scheduler calls the "
                        f"extender at {state.get('extender_url')} (use restart_scheduler)"
                    )
                self.log(f"cluster already running in {self.state_dir} ({self.server})")
                return
            if running:
                self.log("cluster partly running; restarting it")
                self._stop_all()
            self._start_all(bins)

    def _start_all(self, bins: Path) -> None:
        started_at = time.monotonic()
        for sub in ("logs", "pids", "pki", "auth", "etcd"):
            self._path(sub).mkdir(parents=True, exist_ok=True)
        self._path("etcd").chmod(0o700)  # etcd refuses data dirs others can read
        self._ensure_pki()
        self._ensure_tokens()
        previous = self.ports
        taken: set[int] = set()
        ports: dict[str, int] = {}
        for name in ("etcd", "etcd-peer", "kube-apiserver", "kube-scheduler"):
            ports[name] = _pick_port(previous.get(name), taken)
            taken.add(ports[name])
        state = {
            "ports": ports,
            "extender_url": self.extender_url,
            "run_scheduler": self.run_scheduler,
            "bin_dir": str(bins),
            "kubernetes": kubernetes_version(self.controlplane_dir),
        }
        self._path("state.json").write_text(json.dumps(state, indent=2) + "\n")
        self._write_kubeconfigs(ports["kube-apiserver"])

        started: list[_Started] = []
        try:
            started.append(self._start_etcd(bins, ports))
            self._wait(
                "etcd", lambda: _http_get(f"http://127.0.0.1:{ports['etcd']}/health")[0] == 200, started[-1]
            )
            started.append(self._start_apiserver(bins, ports))
            self._wait("kube-apiserver", self._apiserver_ready, started[-1])
            self._wait(
                "kube-apiserver",
                lambda: (
                    _http_get(
                        f"{self.server}/api/v1/namespaces/default",
                        token=self.admin_token,
                        context=self.ssl_context(),
                    )[0]
                    == 200
                ),
                started[-1],
                what="namespace default",
            )
            self._apply_crds()
            if self.run_scheduler:
                started.append(self._start_scheduler(bins, ports["kube-scheduler"]))
        except BaseException:
            for proc in reversed(started):
                self._stop_started(proc)
            raise
        self.log(
            f"cluster up in {time.monotonic() - started_at:.1f}s: {self.server}, state in {self.state_dir}"
        )

    def _wait(self, name: str, ready: Callable[[], bool], proc: _Started, what: str = "ready") -> None:
        """Poll ``ready`` until it passes, failing fast if the process exits."""
        t0 = time.monotonic()
        deadline = t0 + self.start_timeout
        while True:
            if ready():
                self.log(f"{name} {what} after {time.monotonic() - t0:.1f}s")
                return
            if not _alive(proc.pid, proc.start_time):
                msg = (
                    f"{name} exited during start-up; last lines of "
                    f"{self._path('logs', name + '.log')}:\n"
                    f"{_tail(self._path('logs', name + '.log'))}"
                )
                raise ClusterError(msg)
            if time.monotonic() > deadline:
                msg = (
                    f"{name} not {what} after {self.start_timeout:.0f}s; last "
                    f"lines of {self._path('logs', name + '.log')}:\n"
                    f"{_tail(self._path('logs', name + '.log'))}"
                )
                raise ClusterError(msg)
            time.sleep(0.2)

    def _spawn(self, name: str, argv: Sequence[str], port: int) -> _Started:
        """Start one component detached, logging to logs/<name>.log, and record its pid.

        A throwaway ``sh`` starts the component in the background and exits, so the
        component is not our child: it outlives ``hack/cluster up``, leaves no zombie and no
        ``subprocess.Popen`` behind (whose ResourceWarning pytest would turn into an error).
        It also runs in its own session, so a Ctrl-C aimed at the caller does not reach it.
        """
        log_path = self._path("logs", f"{name}.log")
        env = dict(os.environ)
        env.pop("KUBECONFIG", None)
        for var in ("NO_PROXY", "no_proxy"):  # loopback must never go through a proxy
            env[var] = ",".join(filter(None, [env.get(var), "127.0.0.1", "localhost"]))
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S%z")
        with open(log_path, "a") as log_file:
            log_file.write(f"\n==== {stamp} starting: {' '.join(argv)}\n")
        launcher = 'log=$1; shift; "$@" </dev/null >>"$log" 2>&1 & echo $!'
        result = subprocess.run(
            ["/bin/sh", "-c", launcher, "sh", str(log_path), *argv],
            cwd=self.state_dir,
            env=env,
            start_new_session=True,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            check=False,
        )
        try:
            pid = int(result.stdout.strip())
        except ValueError:
            msg = f"could not start {name}: {result.stderr.strip()}"
            raise ClusterError(msg) from None
        stat = _proc_stat(pid)
        if stat is None or stat[0] in ("Z", "X"):
            msg = f"{name} exited immediately; last lines of {log_path}:\n{_tail(log_path)}"
            raise ClusterError(msg)
        record = {"pid": pid, "start_time": stat[1], "port": port}
        self._path("pids", f"{name}.pid").write_text(json.dumps(record) + "\n")
        self.log(f"started {name} (pid {pid}, port {port})")
        return _Started(name, pid, stat[1])

    def _start_etcd(self, bins: Path, ports: Mapping[str, int]) -> _Started:
        argv = [
            str(bins / "etcd"),
            "--name=phalanx",
            f"--data-dir={self._path('etcd')}",
            f"--listen-client-urls=http://127.0.0.1:{ports['etcd']}",
            f"--listen-peer-urls=http://127.0.0.1:{ports['etcd-peer']}",
            # Throwaway test state: skipping fsync makes every apiserver write much cheaper.
            "--unsafe-no-fsync",
            "--log-level=warn",
        ]
        return self._spawn("etcd", argv, ports["etcd"])

    def _start_apiserver(self, bins: Path, ports: Mapping[str, int]) -> _Started:
        pki = self._path("pki")
        argv = [
            str(bins / "kube-apiserver"),
            f"--etcd-servers=http://127.0.0.1:{ports['etcd']}",
            "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1",
            f"--secure-port={ports['kube-apiserver']}",
            f"--tls-cert-file={pki / 'apiserver.crt'}",
            f"--tls-private-key-file={pki / 'apiserver.key'}",
            f"--cert-dir={pki}",
            f"--token-auth-file={self._path('auth', 'tokens.csv')}",
            # These fill kube-system/extension-apiserver-authentication, which kube-scheduler's
            # delegated authentication reads; without both CAs it logs errors in a loop. The
            # CA only ever signs serverAuth certificates, so it admits no client.
            f"--client-ca-file={pki / 'ca.crt'}",
            f"--requestheader-client-ca-file={pki / 'ca.crt'}",
            "--requestheader-allowed-names=front-proxy-client",
            "--requestheader-username-headers=X-Remote-User",
            "--requestheader-group-headers=X-Remote-Group",
            "--requestheader-extra-headers-prefix=X-Remote-Extra-",
            "--authorization-mode=RBAC",
            f"--service-account-issuer={SERVICE_ACCOUNT_ISSUER}",
            f"--service-account-key-file={pki / 'sa.pub'}",
            f"--service-account-signing-key-file={pki / 'sa.key'}",
            f"--service-cluster-ip-range={SERVICE_CLUSTER_IP_RANGE}",
            # No controller-manager runs, so nobody would create the `default`
            # ServiceAccount the ServiceAccount admission plugin insists on.
            "--disable-admission-plugins=ServiceAccount",
            # The endpoints of the `kubernetes` Service may not be a loopback address;
            # nothing here needs that Service to have endpoints.
            "--endpoint-reconciler-type=none",
            "--profiling=false",
            "--v=1",
        ]
        return self._spawn("kube-apiserver", argv, ports["kube-apiserver"])

    def _start_scheduler(self, bins: Path, port: int) -> _Started:
        rendered = render_scheduler_config(
            self.scheduler_config.read_text(), self.scheduler_kubeconfig, self.extender_url
        )
        config = self._path("scheduler-config.yaml")
        config.write_text(rendered)
        argv = [
            str(bins / "kube-scheduler"),
            f"--config={config}",
            f"--authentication-kubeconfig={self.scheduler_kubeconfig}",
            f"--authorization-kubeconfig={self.scheduler_kubeconfig}",
            "--bind-address=127.0.0.1",
            f"--secure-port={port}",
            f"--cert-dir={self._path('pki', 'scheduler')}",
            f"--v={self.scheduler_verbosity}",
        ]
        proc = self._spawn("kube-scheduler", argv, port)
        insecure = ssl.create_default_context()
        insecure.check_hostname = False
        insecure.verify_mode = ssl.CERT_NONE  # self-signed serving cert; it is only a probe
        try:
            self._wait(
                "kube-scheduler",
                lambda: _http_get(f"https://127.0.0.1:{port}/healthz", context=insecure)[0] == 200,
                proc,
            )
        except BaseException:
            self._stop_started(proc)
            raise
        return proc

    def restart_scheduler(
        self, extender_url: str | None = None, scheduler_config: Path | str | None = None
    ) -> None:
        """Restart only kube-scheduler, e.g. to point it at an extender on a new port.

        Args:
            extender_url: New extender ``urlPrefix`` (default: keep the current one).
            scheduler_config: New config template (default: keep the current one).

        Raises:
            ClusterError: If the apiserver is not running or the scheduler fails to start.
        """
        if extender_url is not None:
            self.extender_url = extender_url
        if scheduler_config is not None:
            self.scheduler_config = Path(scheduler_config).resolve()
        with _flock(self._path(".lock"), self.log, "starting or stopping the cluster"):
            if not self._apiserver_ready():
                msg = f"no ready cluster in {self.state_dir}; run up() first"
                raise ClusterError(msg)
            self._stop_component("kube-scheduler")
            state = self._state()
            ports = {k: int(v) for k, v in state["ports"].items()}
            ports["kube-scheduler"] = _pick_port(
                ports.get("kube-scheduler"), {v for k, v in ports.items() if k != "kube-scheduler"}
            )
            state.update(ports=ports, extender_url=self.extender_url, run_scheduler=True)
            self._path("state.json").write_text(json.dumps(state, indent=2) + "\n")
            self._start_scheduler(self.build(), ports["kube-scheduler"])

    def _apply_crds(self) -> None:
        """Apply and wait for every CRD manifest in ``manifests/crds/`` (if any)."""
        crd_dir = self.repo_root / "manifests" / "crds"
        files = sorted(p for p in crd_dir.glob("*") if p.suffix in (".yaml", ".yml", ".json"))
        if not files:
            return
        for path in files:
            self.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(path))
        for path in files:
            self.kubectl("wait", "--for=condition=Established", "--timeout=60s", "-f", str(path))
        self.log(f"applied {len(files)} CRD manifest(s) from {crd_dir}")

    def _ensure_pki(self) -> None:
        """Create the CA, apiserver serving cert and service-account key unless present.

        They are kept across restarts so kubeconfigs and tokens handed out stay valid.
        """
        pki = self._path("pki")
        ca_key, ca_crt = pki / "ca.key", pki / "ca.crt"
        if not (ca_key.exists() and ca_crt.exists()):
            _run_openssl(
                "req",
                "-x509",
                "-newkey",
                "ec",
                "-pkeyopt",
                "ec_paramgen_curve:prime256v1",
                "-nodes",
                "-keyout",
                str(ca_key),
                "-out",
                str(ca_crt),
                "-days",
                "3650",
                "-subj",
                "/CN=phalanx-local-ca",
                "-addext",
                "basicConstraints=critical,CA:TRUE",
                "-addext",
                "keyUsage=critical,keyCertSign,cRLSign",
            )
            (pki / "apiserver.crt").unlink(missing_ok=True)
        key, crt = pki / "apiserver.key", pki / "apiserver.crt"
        if not (key.exists() and crt.exists()):
            csr, ext = pki / "apiserver.csr", pki / "apiserver.ext"
            names = [
                "DNS:localhost",
                "DNS:kubernetes",
                "DNS:kubernetes.default",
                "DNS:kubernetes.default.svc",
                "DNS:kubernetes.default.svc.cluster.local",
                "IP:127.0.0.1",
                "IP:10.0.0.1",
            ]
            ext.write_text(
                "basicConstraints=critical,CA:FALSE\n"
                "keyUsage=critical,digitalSignature,keyEncipherment\n"
                "extendedKeyUsage=serverAuth\n"
                "subjectKeyIdentifier=hash\n"
                "authorityKeyIdentifier=keyid,issuer\n"
                f"subjectAltName={','.join(names)}\n"
            )
            _run_openssl(
                "req",
                "-new",
                "-newkey",
                "ec",
                "-pkeyopt",
                "ec_paramgen_curve:prime256v1",
                "-nodes",
                "-keyout",
                str(key),
                "-out",
                str(csr),
                "-subj",
                "/CN=kube-apiserver",
            )
            _run_openssl(
                "x509",
                "-req",
                "-in",
                str(csr),
                "-CA",
                str(ca_crt),
                "-CAkey",
                str(ca_key),
                "-set_serial",
                f"0x{secrets.token_hex(16)}",
                "-days",
                "3650",
                "-extfile",
                str(ext),
                "-out",
                str(crt),
            )
            csr.unlink()
            ext.unlink()
        sa_key, sa_pub = pki / "sa.key", pki / "sa.pub"
        if not (sa_key.exists() and sa_pub.exists()):
            _run_openssl("genrsa", "-out", str(sa_key), "2048")
            _run_openssl("rsa", "-in", str(sa_key), "-pubout", "-out", str(sa_pub))
        for private in (ca_key, key, sa_key):
            private.chmod(0o600)

    def _ensure_tokens(self) -> None:
        """Create the static token file (admin + scheduler) unless present."""
        path = self._path("auth", "tokens.csv")
        tokens = self._tokens()
        if "admin" in tokens and "system:kube-scheduler" in tokens:
            return
        _write_private(
            path,
            (
                f'{secrets.token_hex(24)},admin,phalanx-admin,"system:masters"\n'
                f"{secrets.token_hex(24)},system:kube-scheduler,phalanx-kube-scheduler\n"
            ),
        )

    def _write_kubeconfigs(self, port: int) -> None:
        ca = base64.b64encode(self.ca_file.read_bytes()).decode()
        tokens = self._tokens()
        for path, user in ((self.kubeconfig, "admin"), (self.scheduler_kubeconfig, "system:kube-scheduler")):
            _write_private(
                path,
                (
                    "apiVersion: v1\n"
                    "kind: Config\n"
                    "clusters:\n"
                    "- name: phalanx-local\n"
                    "  cluster:\n"
                    f"    server: https://127.0.0.1:{port}\n"
                    f"    certificate-authority-data: {ca}\n"
                    "users:\n"
                    f"- name: {json.dumps(user)}\n"
                    "  user:\n"
                    f"    token: {tokens[user]}\n"
                    "contexts:\n"
                    "- name: phalanx-local\n"
                    "  context:\n"
                    "    cluster: phalanx-local\n"
                    f"    user: {json.dumps(user)}\n"
                    "current-context: phalanx-local\n"
                ),
            )

    # ---- stopping

    def _stop_started(self, proc: _Started) -> None:
        self._stop_pid(proc.name, proc.pid, proc.start_time)

    def _stop_pid(self, name: str, pid: int, start_time: int) -> None:
        if _stop_process(pid, start_time):
            self.log(f"stopped {name} (pid {pid})")
        self._path("pids", f"{name}.pid").unlink(missing_ok=True)

    def _stop_component(self, name: str) -> None:
        info = self._read_pidfile(name)
        if info is not None:
            self._stop_pid(name, info["pid"], info["start_time"])

    def _stop_all(self) -> None:
        for name in reversed(COMPONENTS):
            self._stop_component(name)

    def down(self, purge: bool = False) -> None:
        """Stop exactly the processes this cluster directory records; keep its state.

        Each process gets SIGTERM, then SIGKILL after 10 s. A pid whose /proc start time no
        longer matches the pid file belongs to someone else and is left alone.

        Args:
            purge: Also delete the state directory (only if it looks like a cluster's).

        Raises:
            ClusterError: If ``purge`` is set but the directory does not look like a cluster
                state directory (a guard against ``--dir ~``).
        """
        if not self.state_dir.exists():
            return
        with _flock(self._path(".lock"), self.log, "starting or stopping the cluster"):
            self._stop_all()
        if purge:
            markers = ("state.json", "pids", "pki", "logs")
            if not any(self._path(m).exists() for m in markers) and any(self.state_dir.iterdir()):
                msg = f"refusing to delete {self.state_dir}: not a cluster dir"
                raise ClusterError(msg)
            shutil.rmtree(self.state_dir)
            self.log(f"deleted {self.state_dir}")

    # ---- kubectl and context management

    def kubectl(
        self,
        *args: str,
        check: bool = True,
        input: str | None = None,
        timeout: float | None = 120,
    ) -> subprocess.CompletedProcess[str]:
        """Run the cached kubectl against this cluster and capture its output.

        Raises:
            ClusterError: If ``check`` is set and kubectl exits non-zero.
        """
        env = dict(os.environ, KUBECONFIG=str(self.kubeconfig))
        result = subprocess.run(
            [str(self.kubectl_path), *args],
            env=env,
            input=input,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if check and result.returncode != 0:
            msg = f"kubectl {' '.join(args)} failed ({result.returncode}):\n{result.stderr}{result.stdout}"
            raise ClusterError(msg)
        return result

    def __enter__(self) -> LocalCluster:
        self.up()
        return self

    def __exit__(self, *exc: object) -> None:
        self.down()


# --------------------------------------------------------------------------------------------
# Command line


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
        "kube-scheduler) for phalanx.",
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

    sub.add_parser("build", help="build the binaries into the cache (if not there yet)")
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
    up.add_argument("--no-scheduler", action="store_true", help="run only etcd and apiserver")
    down = with_dir(sub.add_parser("down", help="stop the cluster's processes"))
    down.add_argument("--purge", action="store_true", help="also delete the state directory")
    with_dir(sub.add_parser("status", help="show processes; exit 0 iff all up and ready"))
    sub.add_parser("kubectl", help="run kubectl against the cluster: kubectl [--dir DIR] -- ARGS")
    sub.add_parser("paths", help="print the directory holding the built binaries")
    args = parser.parse_args(args_list)

    try:
        if args.command == "build":
            print(build())
        elif args.command == "paths":
            print(bin_dir())
        elif args.command == "up":
            cluster = LocalCluster(
                args.dir, args.extender_url, args.scheduler_config, run_scheduler=not args.no_scheduler
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
                print(f"{proc.name:<15} {state:<8} pid {proc.pid or '-':<8} port {proc.port or '-'}")
            print(
                f"{'apiserver':<15} {'ready' if status.apiserver_ready else 'not ready':<8} "
                f"{status.server or ''}"
            )
            return 0 if status.healthy else 1
    except ClusterError as err:
        print(f"hack/cluster {args.command}: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
