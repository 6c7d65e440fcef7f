"""``LocalCluster``: the handle on one local control plane and its state directory.

The handle holds no process objects, only the directory's path: status, stop and kubectl work from
what the directory records, so a cluster started by one process (``hack/cluster up``, a pytest session)
can be inspected and stopped by another. Starting is in ``startup``, credentials in ``pki``.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import ssl
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

from localcluster.build import CONTROL_PLANE, build_module
from localcluster.config import DEFAULT_EXTENDER_URL
from localcluster.errors import ClusterError, log_to_stderr
from localcluster.locations import REPO_ROOT, bin_dir, default_cluster_dir
from localcluster.pki import read_tokens
from localcluster.processes import Started, alive, flock, http_get, pick_port, proc_stat, stop_process
from localcluster.startup import NODE_MONITOR_GRACE_SECONDS, start_all, start_scheduler

COMPONENTS = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler")
"""Processes a cluster runs, in start order (stopped in reverse)."""


def _expected(run_scheduler: bool, run_controller_manager: bool) -> tuple[str, ...]:
    """The components a cluster started with these options runs."""
    skipped = {"kube-scheduler": not run_scheduler, "kube-controller-manager": not run_controller_manager}
    return tuple(c for c in COMPONENTS if not skipped.get(c, False))


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


class LocalCluster:
    """etcd + kube-apiserver + kube-controller-manager + kube-scheduler on loopback, state in one directory.

    Layout of ``state_dir``::

        state.json              ports, extender URL, whether a scheduler runs
        kubeconfig              admin (system:masters) kubeconfig, CA-verified TLS
        scheduler.kubeconfig    kubeconfig of user system:kube-scheduler
        controller-manager.kubeconfig   of user system:kube-controller-manager
        mpi-operator.kubeconfig of user system:serviceaccount:mpi-operator:mpi-operator
        node-agent.kubeconfig   of user system:serviceaccount:phalanx-system:phalanx-node-agent
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
        run_controller_manager: bool = True,
        scheduler_verbosity: int = 2,
        start_timeout: float = 120.0,
        node_monitor_grace_seconds: int = NODE_MONITOR_GRACE_SECONDS,
        apiserver_args: tuple[str, ...] = (),
        workload_api: bool = False,
        scheduler_binary: Path | None = None,
        log: Callable[[str], None] = log_to_stderr,
    ) -> None:
        """Describe a cluster; nothing is started until :meth:`up`.

        Args:
            state_dir: Where the cluster keeps everything (default: ``default_cluster_dir()``).
            extender_url: The extender's ``urlPrefix`` the scheduler is pointed at.
            scheduler_config: KubeSchedulerConfiguration template (default: the repo's
                ``manifests/scheduler-config.yaml``).
            repo_root: Checkout providing ``hack/controlplane`` and ``manifests/``.
            run_scheduler: False starts no kube-scheduler.
            run_controller_manager: False starts no kube-controller-manager (its Job
                controller, garbage collectors and node lifecycle controllers).
            scheduler_verbosity: kube-scheduler ``-v`` (2 logs each scheduling attempt).
            start_timeout: Seconds each component gets to become ready.
            node_monitor_grace_seconds: How long a node's Lease may go unrenewed before the node
                lifecycle controller marks it unreachable (``--node-monitor-grace-period``).
            apiserver_args: More kube-apiserver flags (the bench turns an alpha API on with them).
            workload_api: True serves the native Workload API (``scheduling.k8s.io/v1alpha2``
                Workload and PodGroup) with its alpha gates on in every component
                (``WORKLOAD_API_GATES``): the Job controller then makes a PodGroup for a gang-shaped Job.
            scheduler_binary: The kube-scheduler to run (default: the one built from
                ``hack/controlplane``); the framework sidecar's ``phalanx-scheduler`` takes its flags.
            log: Receives progress lines (default: stderr).
        """
        self.state_dir = Path(state_dir or default_cluster_dir()).resolve()
        self.repo_root = Path(repo_root or REPO_ROOT).resolve()
        self.extender_url = extender_url
        self.scheduler_config = Path(
            scheduler_config or self.repo_root / "manifests" / "scheduler-config.yaml"
        ).resolve()
        self.run_scheduler = run_scheduler
        self.run_controller_manager = run_controller_manager
        self.scheduler_verbosity = scheduler_verbosity
        self.start_timeout = start_timeout
        self.node_monitor_grace_seconds = node_monitor_grace_seconds
        self.apiserver_args = apiserver_args
        self.workload_api = workload_api
        self.scheduler_binary = scheduler_binary
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
    def controller_manager_kubeconfig(self) -> Path:
        """The kubeconfig kube-controller-manager uses (user ``system:kube-controller-manager``)."""
        return self.state_dir / "controller-manager.kubeconfig"

    @property
    def mpi_operator_kubeconfig(self) -> Path:
        """A kubeconfig for the MPI Operator (user ``system:serviceaccount:mpi-operator:mpi-operator``)."""
        return self.state_dir / "mpi-operator.kubeconfig"

    @property
    def node_agent_kubeconfig(self) -> Path:
        """A kubeconfig for node agents (the ServiceAccount of ``manifests/node-agent.yaml``)."""
        return self.state_dir / "node-agent.kubeconfig"

    @property
    def ca_file(self) -> Path:
        """PEM CA that signed the apiserver's serving certificate."""
        return self.state_dir / "pki" / "ca.crt"

    @property
    def admin_token(self) -> str:
        """Bearer token of the admin user."""
        return self.tokens()["admin"]

    @property
    def ports(self) -> dict[str, int]:
        """Ports of the current (or last) run, by component (and ``etcd-peer``)."""
        return {k: int(v) for k, v in self._state().get("ports", {}).items()}

    @property
    def server(self) -> str:
        """The apiserver URL, ``https://127.0.0.1:<port>``."""
        port = self.ports.get("kube-apiserver")
        if not port:
            msg = f"no cluster has been started in {self.state_dir}"
            raise ClusterError(msg)
        return f"https://127.0.0.1:{port}"

    def path(self, *parts: str) -> Path:
        """A path under the state directory."""
        return self.state_dir.joinpath(*parts)

    def _state(self) -> dict[str, Any]:
        try:
            data = json.loads(self.path("state.json").read_text())
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def tokens(self) -> dict[str, str]:
        """Bearer tokens by user (``auth/tokens.csv``)."""
        return read_tokens(self.path("auth", "tokens.csv"))

    def ssl_context(self) -> ssl.SSLContext:
        """An SSL context that verifies the apiserver against this cluster's CA."""
        return ssl.create_default_context(cafile=str(self.ca_file))

    # ---- building

    def build(self) -> Path:
        """Build the control plane's binaries if the cache lacks them; return the bin directory."""
        return build_module(CONTROL_PLANE, self.controlplane_dir, self.log)

    # ---- status

    def _read_pidfile(self, name: str) -> dict[str, int] | None:
        try:
            data = json.loads(self.path("pids", f"{name}.pid").read_text())
            return {
                "pid": int(data["pid"]),
                "start_time": int(data["start_time"]),
                "port": int(data.get("port") or 0),
            }
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def apiserver_ready_now(self, timeout: float = 5.0) -> bool:
        """Whether the API server answers ``/readyz`` now."""
        try:
            context = self.ssl_context()
            status, body = http_get(
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
            running = alive(info["pid"], info["start_time"])
            processes.append(ProcessStatus(name, running, info["pid"], info["port"] or None))
        apiserver_running = any(p.running for p in processes if p.name == "kube-apiserver")
        ready = apiserver_running and self.apiserver_ready_now()
        state = self._state()
        expected = _expected(state.get("run_scheduler", True), state.get("run_controller_manager", False))
        return ClusterStatus(tuple(processes), expected, ready, self.server if self.ports else None)

    # ---- starting

    def up(self) -> None:
        """Build if needed and start the control plane; a healthy running cluster is kept.

        Blocks until etcd is healthy, the apiserver's /readyz passes, the ``default``
        namespace exists, the CRDs in ``manifests/crds/`` are established and the
        controller-manager's and scheduler's /healthz pass. On failure everything this call
        started is stopped again.

        Raises:
            ClusterError: If building or any start-up step fails; the message ends with the
                tail of the failing component's log.
        """
        bins = self.build()
        self.state_dir.mkdir(parents=True, exist_ok=True)
        with flock(self.path(".lock"), self.log, "starting or stopping the cluster"):
            current = self.status()
            wanted = _expected(self.run_scheduler, self.run_controller_manager)
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
            start_all(self, bins)

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
        with flock(self.path(".lock"), self.log, "starting or stopping the cluster"):
            if not self.apiserver_ready_now():
                msg = f"no ready cluster in {self.state_dir}; run up() first"
                raise ClusterError(msg)
            self._stop_component("kube-scheduler")
            state = self._state()
            ports = {k: int(v) for k, v in state["ports"].items()}
            ports["kube-scheduler"] = pick_port(
                ports.get("kube-scheduler"), {v for k, v in ports.items() if k != "kube-scheduler"}
            )
            state.update(ports=ports, extender_url=self.extender_url, run_scheduler=True)
            self.path("state.json").write_text(json.dumps(state, indent=2) + "\n")
            start_scheduler(self, self.build(), ports["kube-scheduler"])

    # ---- stopping

    def stop_started(self, proc: Started) -> None:
        """Stop a component this run started (a failed ``up`` leaves nothing running)."""
        self._stop_pid(proc.name, proc.pid, proc.start_time)

    def _stop_pid(self, name: str, pid: int, start_time: int) -> None:
        if stop_process(pid, start_time):
            self.log(f"stopped {name} (pid {pid})")
        self.path("pids", f"{name}.pid").unlink(missing_ok=True)

    def stop_scheduler(self) -> None:
        """Stop only kube-scheduler (``restart_scheduler`` starts it again): nothing binds meanwhile."""
        with flock(self.path(".lock"), self.log, "starting or stopping the cluster"):
            self._stop_component("kube-scheduler")

    def _stop_component(self, name: str) -> None:
        info = self._read_pidfile(name)
        if info is not None:
            self._stop_pid(name, info["pid"], info["start_time"])

    def record_process(self, name: str, pid: int) -> None:
        """Record a process started beside the cluster (the test bed's extender, kubelet, ...) for ``down``.

        ``hack/demo --keep`` leaves them running with the control plane; without a pid file ``down``
        would stop the control plane and orphan them, retrying a dead API server for ever.
        """
        stat = proc_stat(pid)
        if stat is None:
            return
        record = {"pid": pid, "start_time": stat[1], "port": 0}
        self.path("pids", f"{name}.pid").write_text(json.dumps(record) + "\n")

    def _stop_all(self) -> None:
        extras = sorted(p.stem for p in self.path("pids").glob("*.pid") if p.stem not in COMPONENTS)
        for name in [*extras, *reversed(COMPONENTS)]:  # what talks to the API server goes first
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
        with flock(self.path(".lock"), self.log, "starting or stopping the cluster"):
            self._stop_all()
        if purge:
            markers = ("state.json", "pids", "pki", "logs")
            if not any(self.path(m).exists() for m in markers) and any(self.state_dir.iterdir()):
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
