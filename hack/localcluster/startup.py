"""Bringing a cluster up: credentials, ports, then each component in order (etcd first, scheduler last).

Each component is started detached and polled until it answers, failing fast (with the tail of its log)
when it exits, and everything already started is stopped again when a later step fails, so a failed
``up`` leaves no half-running cluster behind. The command lines live here too, with the reason for
every flag that is not a default.
"""

from __future__ import annotations

import json
import ssl
import subprocess
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Protocol

from localcluster.config import render_scheduler_config
from localcluster.errors import ClusterError
from localcluster.locations import kubernetes_version
from localcluster.pki import MPI_OPERATOR_USER, NODE_AGENT_USER, ensure_pki, ensure_tokens, write_kubeconfig
from localcluster.processes import Started, alive, http_get, pick_port, spawn_detached, tail


class Booting(Protocol):
    """What bringing a cluster up reads of it and calls on it (``localcluster.cluster.LocalCluster``).

    Declared here, not imported, so that the cluster may call this module without this module calling
    back into the cluster's: startup depends on this shape only.
    """

    state_dir: Path
    repo_root: Path
    scheduler_config: Path
    scheduler_binary: Path | None
    extender_url: str
    run_scheduler: bool
    run_controller_manager: bool
    apiserver_args: tuple[str, ...]
    scheduler_verbosity: int
    start_timeout: float
    node_monitor_grace_seconds: int
    workload_api: bool
    log: Callable[[str], None]

    @property
    def controlplane_dir(self) -> Path:
        """The Go module that builds the control plane."""

    @property
    def kubeconfig(self) -> Path:
        """The admin kubeconfig."""

    @property
    def scheduler_kubeconfig(self) -> Path:
        """kube-scheduler's kubeconfig."""

    @property
    def controller_manager_kubeconfig(self) -> Path:
        """kube-controller-manager's kubeconfig."""

    @property
    def mpi_operator_kubeconfig(self) -> Path:
        """The MPI Operator's kubeconfig."""

    @property
    def node_agent_kubeconfig(self) -> Path:
        """The node agent's kubeconfig."""

    @property
    def ca_file(self) -> Path:
        """The cluster CA's certificate."""

    @property
    def admin_token(self) -> str:
        """The admin's bearer token."""

    @property
    def ports(self) -> dict[str, int]:
        """The ports of the last start, by component."""

    @property
    def server(self) -> str:
        """The API server's URL."""

    def path(self, *parts: str) -> Path:
        """A path under the state directory."""

    def tokens(self) -> dict[str, str]:
        """Bearer tokens by user."""

    def ssl_context(self) -> ssl.SSLContext:
        """A context that trusts the cluster CA."""

    def apiserver_ready_now(self, timeout: float = 5.0) -> bool:
        """Whether the API server answers ready."""

    def stop_started(self, proc: Started) -> None:
        """Stop a component started by this run."""

    def kubectl(
        self, *args: str, check: bool = True, input: str | None = None, timeout: float | None = 120
    ) -> subprocess.CompletedProcess[str]:
        """Run kubectl against the cluster."""


SERVICE_CLUSTER_IP_RANGE = "10.0.0.0/24"
"""Virtual service range; nothing routes it, the apiserver just needs one to allocate from."""

SERVICE_ACCOUNT_ISSUER = "https://kubernetes.default.svc.cluster.local"

CONTROLLERS = (
    "job-controller",
    "garbage-collector-controller",
    "node-lifecycle-controller",
    "taint-eviction-controller",
    "pod-garbage-collector-controller",
)
"""The controllers kube-controller-manager runs: those a real cluster relies on for what phalanx meets.
The Job controller creates the pods of batch/v1 Jobs (the MPI Operator's launcher is one); the garbage
collector deletes what an owner reference points to a deleted owner (an MPIJob's pods, Jobs,
ConfigMaps, PodGroup; a deleted node's Lease). For node loss: the node lifecycle controller marks a node
whose Lease its kubelet stopped renewing ``Ready=Unknown`` and taints it ``node.kubernetes.io/unreachable``
(``not-ready`` for ``Ready=False``), the taint eviction controller evicts the pods that do not tolerate
the taint once their ``tolerationSeconds`` have passed, and the pod garbage collector deletes the pods
of a deleted node (after its fixed 40 s quarantine) and finished pods past its threshold. The simulated
kubelet renews the Leases (``testbed.heartbeat``). Not run: service accounts and their tokens are not
used here."""

CONTROLLER_ROLES = (
    "system:controller:job-controller",
    "system:controller:generic-garbage-collector",
    "system:controller:node-controller",
    "system:controller:pod-garbage-collector",
)
"""The bootstrap ClusterRoles of those controllers (the node lifecycle and taint eviction controllers
share ``node-controller``'s). kube-controller-manager runs them with its own credentials
(``--use-service-account-credentials=false``: no token controller runs), so its user gets each role by a
ClusterRoleBinding, besides the bootstrap policy's ``system:kube-controller-manager``."""

NODE_MONITOR_GRACE_SECONDS = 50
"""``--node-monitor-grace-period``: kube-controller-manager's default. A test bed that kills nodes
shortens it (``LocalCluster(node_monitor_grace_seconds=...)``) and its simulated kubelet renews each
Lease in step (``Testbed``)."""

NODE_MONITOR_PERIOD_SECONDS = 1
"""``--node-monitor-period`` (default 5 s): how often the node lifecycle controller looks at every
node's health; 1 s, so a node is marked and its taints follow within a second of the grace period,
not five (a test waits on that)."""


def start_all(cluster: Booting, bins: Path) -> None:
    """Start every component of ``cluster`` from ``bins``; stop what was started if a step fails."""
    started_at = time.monotonic()
    for sub in ("logs", "pids", "pki", "auth", "etcd"):
        cluster.path(sub).mkdir(parents=True, exist_ok=True)
    cluster.path("etcd").chmod(0o700)  # etcd refuses data dirs others can read
    ensure_pki(cluster.path("pki"))
    ensure_tokens(cluster.path("auth", "tokens.csv"))
    previous = cluster.ports
    taken: set[int] = set()
    ports: dict[str, int] = {}
    for name in ("etcd", "etcd-peer", "kube-apiserver", "kube-controller-manager", "kube-scheduler"):
        ports[name] = pick_port(previous.get(name), taken)
        taken.add(ports[name])
    state = {
        "ports": ports,
        "extender_url": cluster.extender_url,
        "run_scheduler": cluster.run_scheduler,
        "run_controller_manager": cluster.run_controller_manager,
        "bin_dir": str(bins),
        "kubernetes": kubernetes_version(cluster.controlplane_dir),
    }
    cluster.path("state.json").write_text(json.dumps(state, indent=2) + "\n")
    tokens = cluster.tokens()
    users = (
        (cluster.kubeconfig, "admin"),
        (cluster.scheduler_kubeconfig, "system:kube-scheduler"),
        (cluster.controller_manager_kubeconfig, "system:kube-controller-manager"),
        (cluster.mpi_operator_kubeconfig, MPI_OPERATOR_USER),
        (cluster.node_agent_kubeconfig, NODE_AGENT_USER),
    )
    for path, user in users:
        write_kubeconfig(path, ports["kube-apiserver"], cluster.ca_file, user, tokens[user])

    started: list[Started] = []
    try:
        started.append(_spawn(cluster, "etcd", _etcd_argv(cluster, bins, ports), ports["etcd"]))
        etcd_health = f"http://127.0.0.1:{ports['etcd']}/health"
        _wait(cluster, "etcd", lambda: http_get(etcd_health)[0] == 200, started[-1])
        argv = _apiserver_argv(cluster, bins, ports)
        started.append(_spawn(cluster, "kube-apiserver", argv, ports["kube-apiserver"]))
        _wait(cluster, "kube-apiserver", cluster.apiserver_ready_now, started[-1])
        _wait(
            cluster,
            "kube-apiserver",
            lambda: (
                http_get(
                    f"{cluster.server}/api/v1/namespaces/default",
                    token=cluster.admin_token,
                    context=cluster.ssl_context(),
                )[0]
                == 200
            ),
            started[-1],
            what="namespace default",
        )
        _apply_crds(cluster)
        if cluster.run_controller_manager:
            started.append(_start_controller_manager(cluster, bins, ports["kube-controller-manager"]))
        if cluster.run_scheduler:
            started.append(start_scheduler(cluster, bins, ports["kube-scheduler"]))
    except BaseException:
        for proc in reversed(started):
            cluster.stop_started(proc)
        raise
    cluster.log(
        f"cluster up in {time.monotonic() - started_at:.1f}s: {cluster.server}, state in {cluster.state_dir}"
    )


WORKLOAD_API_GATES = ("GenericWorkload", "GangScheduling", "WorkloadWithJob")
"""The alpha gates of Kubernetes v1.36's Workload API (all off by default): ``GenericWorkload`` serves
``scheduling.k8s.io/v1alpha2`` and a pod's ``spec.schedulingGroup``, ``GangScheduling`` (which needs it)
validates and schedules gang policies, ``WorkloadWithJob`` makes the Job controller create a Workload
and a PodGroup for an indexed Job whose parallelism equals its completions."""

WORKLOAD_API_VERSION = "scheduling.k8s.io/v1alpha2"
"""The group version of Workload and PodGroup in v1.36 (alpha: served only when asked for)."""


def workload_api_flags(cluster: Booting, *, apiserver: bool = False) -> list[str]:
    """The flags that turn the Workload API on in one component (none unless the cluster asks for it)."""
    if not cluster.workload_api:
        return []
    flags = [f"--feature-gates={','.join(f'{gate}=true' for gate in WORKLOAD_API_GATES)}"]
    if apiserver:
        flags.append(f"--runtime-config={WORKLOAD_API_VERSION}=true")
    return flags


def start_scheduler(cluster: Booting, bins: Path, port: int) -> Started:
    """Render the scheduler config, start kube-scheduler on ``port`` and wait for its /healthz."""
    rendered = render_scheduler_config(
        cluster.scheduler_config.read_text(),
        cluster.scheduler_kubeconfig,
        cluster.extender_url,
        extender_ca=cluster.ca_file,  # used when extender_url is https: the CA signed its certificate
    )
    config = cluster.path("scheduler-config.yaml")
    config.write_text(rendered)
    argv = [
        str(cluster.scheduler_binary or bins / "kube-scheduler"),
        f"--config={config}",
        f"--authentication-kubeconfig={cluster.scheduler_kubeconfig}",
        f"--authorization-kubeconfig={cluster.scheduler_kubeconfig}",
        "--bind-address=127.0.0.1",
        f"--secure-port={port}",
        f"--cert-dir={cluster.path('pki', 'scheduler')}",
        f"--v={cluster.scheduler_verbosity}",
        *workload_api_flags(cluster),
    ]
    return _spawn_and_probe(cluster, "kube-scheduler", argv, port)


def _start_controller_manager(cluster: Booting, bins: Path, port: int) -> Started:
    """Grant kube-controller-manager its controllers' roles, start it on ``port``, wait for /healthz."""
    user = "system:kube-controller-manager"
    bindings = "".join(
        "---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\n"
        f"metadata:\n  name: phalanx-local:{role.split(':')[-1]}\n"
        f"roleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: ClusterRole\n  name: {role}\n"
        f"subjects:\n- apiGroup: rbac.authorization.k8s.io\n  kind: User\n  name: {user}\n"
        for role in CONTROLLER_ROLES
    )
    cluster.kubectl("apply", "--server-side", "-f", "-", input=bindings)
    kubeconfig = cluster.controller_manager_kubeconfig
    argv = [
        str(bins / "kube-controller-manager"),
        f"--kubeconfig={kubeconfig}",
        f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}",
        "--bind-address=127.0.0.1",
        f"--secure-port={port}",
        f"--cert-dir={cluster.path('pki', 'controller-manager')}",
        f"--controllers={','.join(CONTROLLERS)}",
        "--use-service-account-credentials=false",
        f"--node-monitor-grace-period={cluster.node_monitor_grace_seconds}s",
        f"--node-monitor-period={NODE_MONITOR_PERIOD_SECONDS}s",
        "--leader-elect=false",  # a lone instance: a Lease would only delay its start
        "--v=1",
        *workload_api_flags(cluster),
    ]
    return _spawn_and_probe(cluster, "kube-controller-manager", argv, port)


def _spawn_and_probe(cluster: Booting, name: str, argv: list[str], port: int) -> Started:
    """Start a component that serves ``/healthz`` on ``port`` and wait until it answers 200."""
    proc = _spawn(cluster, name, argv, port)
    insecure = ssl.create_default_context()
    insecure.check_hostname = False
    insecure.verify_mode = ssl.CERT_NONE  # self-signed serving cert; it is only a probe
    try:
        _wait(
            cluster,
            name,
            lambda: http_get(f"https://127.0.0.1:{port}/healthz", context=insecure)[0] == 200,
            proc,
        )
    except BaseException:
        cluster.stop_started(proc)
        raise
    return proc


def _wait(cluster: Booting, name: str, ready: Callable[[], bool], proc: Started, what: str = "ready") -> None:
    """Poll ``ready`` until it passes, failing fast if the process exits."""
    log_path = cluster.path("logs", name + ".log")
    t0 = time.monotonic()
    deadline = t0 + cluster.start_timeout
    while True:
        if ready():
            cluster.log(f"{name} {what} after {time.monotonic() - t0:.1f}s")
            return
        if not alive(proc.pid, proc.start_time):
            msg = f"{name} exited during start-up; last lines of {log_path}:\n{tail(log_path)}"
            raise ClusterError(msg)
        if time.monotonic() > deadline:
            msg = (
                f"{name} not {what} after {cluster.start_timeout:.0f}s; last lines of {log_path}:\n"
                f"{tail(log_path)}"
            )
            raise ClusterError(msg)
        time.sleep(0.2)


def _spawn(cluster: Booting, name: str, argv: list[str], port: int) -> Started:
    """Start one component detached (logs/<name>.log) and record its pid file for status and down."""
    proc = spawn_detached(name, argv, cluster.path("logs", f"{name}.log"), cluster.state_dir)
    record = {"pid": proc.pid, "start_time": proc.start_time, "port": port}
    cluster.path("pids", f"{name}.pid").write_text(json.dumps(record) + "\n")
    cluster.log(f"started {name} (pid {proc.pid}, port {port})")
    return proc


def _etcd_argv(cluster: Booting, bins: Path, ports: Mapping[str, int]) -> list[str]:
    return [
        str(bins / "etcd"),
        "--name=phalanx",
        f"--data-dir={cluster.path('etcd')}",
        f"--listen-client-urls=http://127.0.0.1:{ports['etcd']}",
        f"--listen-peer-urls=http://127.0.0.1:{ports['etcd-peer']}",
        # Throwaway test state: skipping fsync makes every apiserver write much cheaper.
        "--unsafe-no-fsync",
        "--log-level=warn",
    ]


def _apiserver_argv(cluster: Booting, bins: Path, ports: Mapping[str, int]) -> list[str]:
    pki = cluster.path("pki")
    return [
        str(bins / "kube-apiserver"),
        f"--etcd-servers=http://127.0.0.1:{ports['etcd']}",
        "--bind-address=127.0.0.1",
        "--advertise-address=127.0.0.1",
        f"--secure-port={ports['kube-apiserver']}",
        f"--tls-cert-file={pki / 'apiserver.crt'}",
        f"--tls-private-key-file={pki / 'apiserver.key'}",
        f"--cert-dir={pki}",
        f"--token-auth-file={cluster.path('auth', 'tokens.csv')}",
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
        # No service account controller runs, so nobody would create the `default`
        # ServiceAccount the ServiceAccount admission plugin insists on.
        "--disable-admission-plugins=ServiceAccount",
        # The endpoints of the `kubernetes` Service may not be a loopback address;
        # nothing here needs that Service to have endpoints.
        "--endpoint-reconciler-type=none",
        "--profiling=false",
        "--v=1",
        *cluster.apiserver_args,
        *workload_api_flags(cluster, apiserver=True),
    ]


def _apply_crds(cluster: Booting) -> None:
    """Apply and wait for every CRD manifest in ``manifests/crds/`` (if any)."""
    crd_dir = cluster.repo_root / "manifests" / "crds"
    files = sorted(p for p in crd_dir.glob("*") if p.suffix in (".yaml", ".yml", ".json"))
    if not files:
        return
    for path in files:
        cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(path))
    for path in files:
        cluster.kubectl("wait", "--for=condition=Established", "--timeout=60s", "-f", str(path))
    cluster.log(f"applied {len(files)} CRD manifest(s) from {crd_dir}")
