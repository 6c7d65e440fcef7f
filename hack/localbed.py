"""The local test bed: the real control plane, the extender under gunicorn and the simulated kubelet.

End-to-end tests, the demo and the benchmarks all run on this. Everything is a real process talking
over loopback: ``hack/localcluster/`` starts etcd, kube-apiserver, kube-controller-manager and
kube-scheduler (with the project's scheduler configuration pointing at the extender); this module starts
the extender exactly as production does (``gunicorn 'extender.wsgi:create()'``), the placement manager
and the simulated kubelet, registers simulated GPU nodes and, when asked, runs the Kubeflow MPI
Operator v0.7.0 with ``--gang-scheduling=phalanx`` (``start_mpi_operator``).

It is named ``localbed``, beside ``localcluster``, because the top-level package ``testbed/`` holds
the simulated nodes and kubelet it starts, and with ``hack/`` on ``sys.path`` one name cannot be both.
"""

from __future__ import annotations

import base64
import contextlib
import errno
import functools
import json
import os
import re
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO

import bed_kueue
from bed_webhooks import CONFIGS, GATE_MANIFEST, PIN_MANIFEST, register, testbed_name, wait_callable
from localcluster import MPI_OPERATOR, SIDECAR, LocalCluster, build_module, render_scheduler_config
from localcluster.pki import ensure_serving_cert
from localcluster.processes import port_holder
from localcluster.startup import NODE_MONITOR_GRACE_SECONDS

from kubeio.errors import NotFoundError
from kubeio.http import KubeHttp, load_api_client
from testbed.nodes import SimNodeSpec, register_all, set_ready

REPO = Path(__file__).resolve().parents[1]

PLACEMENT_REPLICAS = ("placement", "placement-b")
"""The names of the placement manager replicas a bed starts (``Testbed.placement_replicas``)."""

PLACEMENT_LEASE = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/phalanx-placement"
"""The placement manager's Lease on the test bed."""


def elect_leader(config: str) -> str:
    """A rendered scheduler config (leader election off) with election on and a short Lease.

    4 s / 3 s / 1 s instead of kube-scheduler's 15 s / 10 s / 2 s, so a failover takes seconds.
    """
    on = "leaderElect: true\n  leaseDuration: 4s\n  renewDeadline: 3s\n  retryPeriod: 1s"
    if "leaderElect: false" not in config:
        msg = "the rendered scheduler config has no 'leaderElect: false' to turn on"
        raise ValueError(msg)
    return config.replace("leaderElect: false", on, 1)


MPI_OPERATOR_NAMESPACE = "mpi-operator"
"""Where the operator's Lease lives (its ``--lock-namespace``), as in its standalone install."""

MPI_OPERATOR_HEALTH_PORT = 8080
"""The stock operator serves /healthz on ``:8080``, hard-coded (no flag): the test bed runs it in a network
namespace of its own (``own_network_namespace``), or, where it cannot, checks the port first
(``check_mpi_operator_port``): then only one runs per machine."""

MPI_OPERATOR_ARGS = ("--gang-scheduling=phalanx", "--kube-api-qps=50", "--kube-api-burst=100")
"""PodGroups for the scheduler ``phalanx``; a client rate above the defaults (5/s, burst 10), which
would make a test that creates many jobs at once measure the operator's throttle."""

MPI_OPERATOR_LEASE = f"/apis/coordination.k8s.io/v1/namespaces/{MPI_OPERATOR_NAMESPACE}/leases/mpi-operator"
"""The Lease the operator must hold before it acts (leader election is always on in the stock binary)."""


class PortTakenError(RuntimeError):
    """A port that cannot be chosen is held by another process; the message names it."""


def check_mpi_operator_port() -> None:
    """Raise ``PortTakenError`` naming the process that holds the MPI Operator's health port, if one does.

    The stock operator v0.7.0 listens on ``:8080`` for ``/healthz`` (a constant in its
    ``cmd/mpi-operator/app/server.go``, no flag) and exits when it cannot, so only one runs per machine.
    """
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("", MPI_OPERATOR_HEALTH_PORT))
        except OSError as exc:
            if exc.errno != errno.EADDRINUSE:
                raise
        else:
            return
    holder = port_holder(MPI_OPERATOR_HEALTH_PORT) or "another process"
    msg = (
        f"port {MPI_OPERATOR_HEALTH_PORT} is taken by {holder}: the MPI Operator v0.7.0 serves its health "
        "check there (hard-coded, no flag), so only one can run on this machine; stop that one first"
    )
    raise PortTakenError(msg)


@functools.cache
def own_network_namespace() -> tuple[str, ...]:
    """The ``unshare`` command that gives a process a network namespace of its own here, or ``()``.

    As root ``unshare --net``; otherwise with a user namespace of its own too, where the kernel allows
    it. Tried once (with ``ip link set lo up``, which the relay needs).
    """
    for command in (("unshare", "--net"), ("unshare", "--net", "--map-root-user")):
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            done = subprocess.run(
                [*command, "--", "sh", "-c", "ip link set lo up"],
                capture_output=True,
                timeout=10,
                check=False,
            )
            if done.returncode == 0:
                return command
    return ()


def write_plan_key(path: Path) -> None:
    """A fresh random plan key in ``path`` (48 bytes of base64, as ``openssl rand -base64 48`` makes)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(base64.b64encode(os.urandom(48)).decode() + "\n")
    path.chmod(0o600)


def sidecar_config(plan_key: Path) -> str:
    """``sidecar/scheduler-config.yaml`` with its plugin reading the plan key at ``plan_key``.

    Raises:
        ValueError: the configuration has no ``keyFile:`` to point there.
    """
    text, count = re.subn(
        r"^([ \t]*keyFile:)[ \t]*.*$",
        lambda m: f"{m.group(1)} {json.dumps(str(plan_key))}",
        (REPO / "sidecar" / "scheduler-config.yaml").read_text(),
        flags=re.MULTILINE,
    )
    if count != 1:
        msg = f"sidecar/scheduler-config.yaml has {count} keyFile entries, not one"
        raise ValueError(msg)
    return text


def free_port() -> int:
    """A TCP port on loopback that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class Testbed:
    """A running control plane, extender and simulated kubelet, with all state in ``state_dir``.

    By default it runs what ``manifests/`` installs: the placement manager with admission gates on and
    its two webhooks (the admission gate and the pin webhook) served over TLS and registered, and the
    extender beside kube-scheduler on loopback over plain HTTP, as the shipped scheduler configuration
    calls it (``manifests/scheduler-config.yaml``: a sidecar). One placement replica: a test about high
    availability starts the second (``start_placement("placement-b")``). A bed that runs anything else
    (gates off, say) is made by a test that says why in its docstring.
    """

    __test__ = False  # not a pytest test class, despite the name

    def __init__(
        self,
        state_dir: Path,
        *,
        extender_port: int | None = None,
        extender_env: dict[str, str] | None = None,
        extender_tls: bool = False,
        placement_grace: float = 60.0,
        mpi_operator: bool = False,
        pin_webhook: bool = True,
        admission_gates: bool = True,
        webhook_certs: str = "internal",
        placement_args: Sequence[str] = (),
        scheduler_pairs: int = 1,
        placement_replicas: int = 1,
        node_grace_seconds: int = NODE_MONITOR_GRACE_SECONDS,
        workload_api: bool = False,
        sidecar: bool = False,
        log: Callable[[str], None] = lambda line: print(line, file=sys.stderr, flush=True),
    ) -> None:
        """A test bed; nothing runs until ``start``.

        ``sidecar`` runs phalanx's framework sidecar instead of kube-scheduler with the extender: the
        ``phalanx-scheduler`` binary with ``sidecar/scheduler-config.yaml``, and the placement manager
        with ``--gate-plan-on-pod=true`` (docs/design/framework-sidecar.md). The extender still runs,
        called by nobody, so the rest of the bed is the same.
        """
        self.state_dir = state_dir
        self.extender_port = extender_port or free_port()
        self.extender_tls = extender_tls
        self.extender_url = f"{'https' if extender_tls else 'http'}://127.0.0.1:{self.extender_port}"
        self.extender_env = extender_env or {}
        self.placement_grace = placement_grace
        self.mpi_operator = mpi_operator
        self.pin_webhook = pin_webhook
        self.admission_gates = admission_gates
        self.webhook_port = free_port()
        self.webhook_certs = webhook_certs
        """``internal`` (the shipped default: the placement manager keeps its own certificates in a Secret
        and writes the CA into the webhook configurations) or ``files`` (a certificate of the cluster's CA
        in files, the configurations' caBundle set by the test bed, as an admin or cert-manager would)."""
        self.sidecar = sidecar
        self.plan_key = state_dir / "plan-key"
        """The plan key (``write_plan_key``): the placement manager's ``--plan-key-file`` and, with
        ``sidecar``, the plugin's ``keyFile``, as the Secret ``phalanx-plan-key`` would be in a cluster."""
        self._sidecar_config = state_dir / "sidecar-scheduler-config.yaml"
        self.placement_args = (*(("--gate-plan-on-pod", "true") if sidecar else ()), *placement_args)
        """More flags for every placement manager replica (last, so they override the test bed's)."""
        self._webhook_replica = "placement"
        self.placement_replicas = PLACEMENT_REPLICAS[:placement_replicas]
        """The replicas ``start`` starts. With two, as the manifests ship them, both serve the webhooks,
        each on a port of its own, behind a relay on ``webhook_port`` that stands in for their Service
        (``testbed.relay tcp-to-tcp``), so the API server's calls reach whichever replica is alive."""
        self.replica_webhook_ports = {name: free_port() for name in self.placement_replicas[1:]}
        self.placement_metrics_ports: dict[str, int] = {}
        self.placement_visibility_ports: dict[str, int] = {}
        """Replica name -> the port of its visibility endpoint (``--visibility-port``, with the webhooks)."""
        """Replica name -> the port of its ``/metrics`` (``--metrics-port``), kept across restarts."""
        self.log = log
        self.scheduler_pairs = scheduler_pairs
        self.extender_b_port = free_port()
        self.extender_b_url = f"http://127.0.0.1:{self.extender_b_port}"
        self.node_grace_seconds = node_grace_seconds
        self.cluster = LocalCluster(
            state_dir,
            extender_url=self.extender_url,
            log=log,
            run_scheduler=scheduler_pairs == 1,
            node_monitor_grace_seconds=node_grace_seconds,
            workload_api=workload_api,
            scheduler_config=self._sidecar_config if sidecar else None,
            scheduler_binary=build_module(SIDECAR, log=log) / "phalanx-scheduler" if sidecar else None,
        )
        self.logs = state_dir / "logs"
        self._procs: dict[str, subprocess.Popen[bytes]] = {}
        self._files: list[IO[bytes]] = []
        self._http: KubeHttp | None = None
        self.kueue: bed_kueue.KueueProcess | None = None
        """Kueue beside phalanx, once ``start_kueue`` ran."""

    @property
    def kubeconfig(self) -> Path:
        """The admin kubeconfig of the control plane."""
        return self.cluster.kubeconfig

    @property
    def http(self) -> KubeHttp:
        """An admin API client for tests and tools."""
        if self._http is None:
            self._http = KubeHttp(load_api_client(str(self.kubeconfig)), user_agent="phalanx-testbed")
        return self._http

    def start(self) -> None:
        """Start the control plane, simulated kubelet, extender, placement manager (and the MPI Operator)."""
        write_plan_key(self.plan_key)
        self._sidecar_config.write_text(sidecar_config(self.plan_key))
        self.cluster.up()
        self.logs.mkdir(parents=True, exist_ok=True)
        # Each node's Lease lasts 4/5 of the grace period and is renewed every quarter of that, as a
        # kubelet's 40 s Lease is beside kube-controller-manager's 50 s grace period.
        lease = max(4, self.node_grace_seconds * 4 // 5)
        argv = [sys.executable, "-m", "testbed.kubelet", "--kubeconfig", str(self.kubeconfig)]
        self._spawn("sim-kubelet", [*argv, "--node-lease-seconds", str(lease)])
        self.start_extender()
        if self.scheduler_pairs == 2:
            self._start_scheduler_pairs()
        if len(self.placement_replicas) > 1:
            self._start_webhook_service()
        for name in self.placement_replicas:
            self.start_placement(name, webhook=self.pin_webhook)
        if self.mpi_operator:
            self.start_mpi_operator()

    def _start_webhook_service(self) -> None:
        """The webhooks' Service: ``webhook_port`` relays each connection to a replica that answers."""
        self.replica_webhook_ports[self.placement_replicas[0]] = free_port()
        backends = ",".join(f"127.0.0.1:{self.replica_webhook_ports[n]}" for n in self.placement_replicas)
        relay = [sys.executable, "-m", "testbed.relay", "tcp-to-tcp"]
        self._spawn(
            "webhook-service", [*relay, "--listen", f"127.0.0.1:{self.webhook_port}", "--to", backends]
        )

    def start_mpi_operator(self, timeout: float = 60.0) -> None:
        """Install the MPIJob CRD and the operator's RBAC, start the operator, wait until it leads.

        The operator runs with ``--gang-scheduling=phalanx`` as the identity its own install gives
        it (ServiceAccount ``mpi-operator/mpi-operator``, bound to the ClusterRole shipped with it), in a
        network namespace of its own where the machine allows one, so its port 8080 is its own.

        Raises:
            PortTakenError: Without a namespace of its own, if port 8080 is taken.
            RuntimeError: If the operator exits or does not lead in time.
        """
        if "mpi-operator" in self._procs:
            return
        unshare = own_network_namespace()
        if not unshare:
            check_mpi_operator_port()
        bins = build_module(MPI_OPERATOR, log=self.log)
        self._install_mpi_operator(bins)
        env = {"KUBECONFIG": str(self.cluster.mpi_operator_kubeconfig)}  # it prefers $KUBECONFIG
        argv = [str(bins / "mpi-operator"), f"--kubeConfig={env['KUBECONFIG']}"]
        argv += [f"--lock-namespace={MPI_OPERATOR_NAMESPACE}", *MPI_OPERATOR_ARGS]
        self._spawn("mpi-operator", self._in_own_network(unshare, argv) if unshare else argv, env)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self._check_alive("mpi-operator")
            with contextlib.suppress(NotFoundError):
                if self.http.request("GET", MPI_OPERATOR_LEASE).get("spec", {}).get("holderIdentity"):
                    return
            time.sleep(0.2)
        log = self.logs / "mpi-operator.log"
        msg = f"the MPI Operator did not take its Lease in {timeout:.0f}s (log: {log})"
        raise RuntimeError(msg)

    def _in_own_network(self, unshare: Sequence[str], argv: list[str]) -> list[str]:
        """``argv`` run in a network namespace of its own, reaching the API server through a relay.

        The operator's hard-coded port 8080 is then its own, whatever else runs on the machine. A
        ``testbed.relay`` outside passes connections from a Unix socket to the API server; one inside
        listens on the API server's loopback address and runs the operator (``testbed/relay.py``).
        """
        path = self.state_dir / "mpi-operator-api.sock"
        path.unlink(missing_ok=True)
        port = urllib.parse.urlsplit(self.cluster.server).port
        relay = [sys.executable, "-m", "testbed.relay"]
        self._spawn(
            "mpi-operator-relay", [*relay, "unix-to-tcp", "--listen", str(path), "--to", f"127.0.0.1:{port}"]
        )
        deadline = time.monotonic() + 30
        while not path.exists():
            self._check_alive("mpi-operator-relay")
            if time.monotonic() > deadline:
                msg = f"the API relay did not listen at {path} in 30s"
                raise RuntimeError(msg)
            time.sleep(0.05)
        inside = [*relay, "tcp-to-unix", "--listen", f"127.0.0.1:{port}", "--to", str(path), "--", *argv]
        return [*unshare, "--", "sh", "-c", 'ip link set lo up && exec "$@"', "sh", *inside]

    def stop_mpi_operator(self, sig: int = signal.SIGTERM) -> None:
        """Stop the operator and delete its Lease, so a new one leads at once rather than after ~15 s.

        ``signal.SIGQUIT`` makes it write every goroutine's stack to its log first (the Go runtime's).
        """
        self._kill("mpi-operator", sig)
        self._kill("mpi-operator-relay", signal.SIGTERM)
        with contextlib.suppress(NotFoundError):
            self.http.request("DELETE", MPI_OPERATOR_LEASE)

    def _install_mpi_operator(self, bins: Path) -> None:
        """The MPIJob CRD (server-side: 665 KB is too large for client-side apply), RBAC, namespace."""
        subject = f"{{kind: ServiceAccount, name: mpi-operator, namespace: {MPI_OPERATOR_NAMESPACE}}}"
        objects = (
            f"apiVersion: v1\nkind: Namespace\nmetadata: {{name: {MPI_OPERATOR_NAMESPACE}}}\n---\n"
            "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\n"
            "metadata: {name: mpi-operator}\n"
            "roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: mpi-operator}\n"
            f"subjects: [{subject}]\n"
        )
        crd = bins / "kubeflow.org_mpijobs.yaml"
        self.cluster.kubectl("apply", "--server-side", "-f", str(crd), "-f", str(bins / "cluster-role.yaml"))
        self.cluster.kubectl("apply", "--server-side", "-f", "-", input=objects)
        self.cluster.kubectl("wait", "--for=condition=Established", "--timeout=60s", "-f", str(crd))
        with contextlib.suppress(NotFoundError):  # left by an operator that was killed: nobody holds it
            self.http.request("DELETE", MPI_OPERATOR_LEASE)

    def start_kueue(
        self,
        frameworks: Sequence[str] = (bed_kueue.MPIJOB_FRAMEWORK,),
        *,
        dispatcher: str | None = None,
        timeout: float = 120.0,
    ) -> None:
        """Install and start Kueue v0.17.0 beside phalanx (``bed_kueue.KueueProcess``); built on first use.

        Raises:
            RuntimeError: Kueue exits, or its webhooks do not admit objects in time.
        """
        if self.kueue is None:
            self.kueue = bed_kueue.KueueProcess(self.cluster, self.state_dir, log=self.log)
        self.kueue.start(frameworks, dispatcher=dispatcher, timeout=timeout)

    def stop_kueue(self) -> None:
        """Stop Kueue and take its webhooks away, so that objects it would have checked are not refused."""
        if self.kueue is not None:
            self.kueue.stop()

    def start_placement(self, name: str = "placement", *, webhook: bool | None = None) -> None:
        """Start a placement manager replica; stale gangs are evicted after ``placement_grace`` seconds.

        Every replica runs with leader election on (a Lease in ``kube-system``, durations shortened to
        3 s / 2 s / 0.5 s so that a test sees a failover in seconds): it acts only while it leads. A
        second replica (another ``name``) is a standby until the first stops. With the webhooks (by
        default the first replica's, ``pin_webhook``) it serves both on a loopback port kept across
        restarts, with the certificates ``webhook_certs`` says; the test bed registers the configurations
        and waits until the replica reports them callable and the API server gates (``wait_webhooks``).
        """
        serve = self.pin_webhook if webhook is None else webhook
        argv = [sys.executable, "-m", "placement", "--kubeconfig", str(self.kubeconfig)]
        argv += ["--interval-seconds", "1", "--stale-grace-seconds", str(self.placement_grace)]
        argv += ["--elastic-cooldown-seconds", "3"]  # elastic moves a few seconds apart, not a minute
        argv += ["--metrics-port", str(self.placement_metrics_ports.setdefault(name, free_port()))]
        argv += ["--lease-namespace", "kube-system", "--lease-duration-seconds", "3"]
        argv += ["--renew-deadline-seconds", "2", "--lease-retry-seconds", "0.5"]
        argv += ["--admission-gates", "true" if self.admission_gates else "false"]
        argv += ["--plan-key-file", str(self.plan_key)]  # read only with --gate-plan-on-pod=true
        argv += ["--gate-plan-refused-after-seconds", "8"]  # a refused plan made elsewhere in 8 s, not 20
        if serve:
            port = self.replica_webhook_ports.get(name, self.webhook_port)
            argv += ["--webhook-port", str(port), "--webhook-bind-address", "127.0.0.1"]
            argv += ["--visibility-port", str(self.placement_visibility_ports.setdefault(name, free_port()))]
            configurations = ",".join(testbed_name(m) for m in (PIN_MANIFEST, GATE_MANIFEST))
            argv += ["--webhook-configurations", configurations]
            argv += ["--webhook-certs", self.webhook_certs, "--webhook-check-seconds", "1"]
            if self.webhook_certs == "files":
                key, crt = ensure_serving_cert(
                    self.cluster.ca_file.parent, "pin-webhook", "/CN=phalanx-pin-webhook", ("IP:127.0.0.1",)
                )
                argv += ["--webhook-cert-file", str(crt), "--webhook-key-file", str(key)]
            else:  # its Secret beside its Lease; the API server calls it on loopback (the URL's host)
                argv += ["--webhook-namespace", "kube-system", "--webhook-cert-names", "127.0.0.1"]
        else:
            argv += ["--webhook-port", "0"]
        self._spawn(name, [*argv, *self.placement_args])
        if serve:
            self._webhook_replica = name
            self.set_pin_webhook(enabled=True, wait=False)
            self.set_admission_gate(enabled=self.admission_gates, wait=False)
            self.wait_webhooks(name)

    def wait_webhooks(self, name: str | None = None, timeout: float = 60.0) -> None:
        """Wait until replica ``name`` reports each registered webhook callable, and the API server gates.

        See ``bed_webhooks.wait_callable``; the dry-run probe only when the bed gates pods.
        """
        name = name or self._webhook_replica
        url = f"http://127.0.0.1:{self.placement_metrics_ports[name]}/metrics"
        wait_callable(
            self.http, url, probe=self.admission_gates, alive=lambda: self._check_alive(name), timeout=timeout
        )

    def placement_leader(self) -> str:
        """The identity holding the placement manager's Lease now (empty when none does)."""
        try:
            lease = self.http.request("GET", PLACEMENT_LEASE)
        except NotFoundError:
            return ""
        return str((lease.get("spec") or {}).get("holderIdentity") or "")

    def set_pin_webhook(self, *, enabled: bool, wait: bool = True) -> None:
        """Register the pin webhook with the API server, or take it away (the pass alone pins then).

        Registered, it is waited for (``wait_webhooks``) while the replica serving it runs: with internal
        certificates a configuration created again has no caBundle until the replica writes it.
        """
        register(self.http, PIN_MANIFEST, base_url=self._webhook_url, ca_file=self._ca_file, enabled=enabled)
        if enabled and wait and self.is_running(self._webhook_replica):
            self.wait_webhooks()

    def set_admission_gate(self, *, enabled: bool, wait: bool = True) -> None:
        """Register the admission gate webhook, or take it away (pods are then created ungated).

        The placement manager gates only when started with ``admission_gates``; registered without it,
        its webhook lets pods through.
        """
        register(self.http, GATE_MANIFEST, base_url=self._webhook_url, ca_file=self._ca_file, enabled=enabled)
        if enabled and wait and self.is_running(self._webhook_replica):
            self.wait_webhooks()

    @property
    def _ca_file(self) -> Path | None:
        """The caBundle the test bed registers: the cluster's CA for files; none when the replica sets it."""
        return self.cluster.ca_file if self.webhook_certs == "files" else None

    def webhook_context(self) -> ssl.SSLContext:
        """A client TLS context that trusts what the API server trusts when it calls the gate webhook.

        That is the gate configuration's ``caBundle``: the placement manager's own CA with internal
        certificates, the cluster's CA with files.
        """
        config = self.http.request("GET", f"{CONFIGS}/{testbed_name(GATE_MANIFEST)}")
        bundle = base64.b64decode(config["webhooks"][0]["clientConfig"]["caBundle"]).decode()
        return ssl.create_default_context(cadata=bundle)

    @property
    def _webhook_url(self) -> str:
        return f"https://127.0.0.1:{self.webhook_port}"

    def pid(self, name: str) -> int:
        """The pid of the process ``name`` this test bed started (0 if it is not running)."""
        proc = self._procs.get(name)
        return proc.pid if proc is not None and proc.poll() is None else 0

    def is_running(self, name: str) -> bool:
        """Whether the process ``name`` this test bed started still runs."""
        proc = self._procs.get(name)
        return proc is not None and proc.poll() is None

    def use_sidecar(self, on: bool, *, scheduler_config: Path | None = None) -> None:
        """Run phalanx as the framework sidecar from now on, or as the extender (as shipped).

        The placement manager (one replica) restarts with ``--gate-plan-on-pod`` set to ``on`` when the
        mode changes, and kube-scheduler restarts in any case: the ``phalanx-scheduler`` binary with the
        sidecar's configuration, or kube-scheduler with the manifests' (``scheduler_config`` instead,
        e.g. the bench's paused profile). Returns once the placement manager leads again, so the gate
        webhook's door answers from a leader.
        """
        if on != self.sidecar:
            self.kill_placement(signal.SIGTERM)
            kept = list(self.placement_args)
            if "--gate-plan-on-pod" in kept:
                at = kept.index("--gate-plan-on-pod")
                del kept[at : at + 2]
            self.placement_args = ("--gate-plan-on-pod", "true" if on else "false", *kept)
            self.sidecar = on
            self.start_placement()
        sidecar = build_module(SIDECAR, log=self.log) / "phalanx-scheduler" if on else None
        self.cluster.scheduler_binary = sidecar
        default = self._sidecar_config if on else REPO / "manifests" / "scheduler-config.yaml"
        self.cluster.restart_scheduler(scheduler_config=scheduler_config or default)
        self.wait_placement_leads()

    def wait_placement_leads(self, name: str = "placement", timeout: float = 60.0) -> None:
        """Wait until replica ``name`` says it leads (its ``phalanx_placement_leader`` gauge is 1)."""
        url = f"http://127.0.0.1:{self.placement_metrics_ports[name]}/metrics"
        deadline = time.monotonic() + timeout
        while True:
            with contextlib.suppress(OSError):
                with urllib.request.urlopen(url, timeout=5) as reply:
                    page = reply.read().decode()
                if re.search(r"^phalanx_placement_leader 1(\.0)?$", page, flags=re.MULTILINE):
                    return
            if time.monotonic() > deadline:
                msg = f"placement manager {name} does not lead after {timeout:.0f} s"
                raise TimeoutError(msg)
            time.sleep(0.2)

    def kill_placement(self, sig: int = signal.SIGKILL, name: str = "placement") -> None:
        """Stop a placement manager replica abruptly (crash tests) or gracefully."""
        self._kill(name, sig)

    def _start_scheduler_pairs(self) -> None:
        """Two kube-scheduler + extender pairs electing a leader (Lease ``kube-system/phalanx-scheduler``).

        ``kube-scheduler-a`` calls ``extender``, ``kube-scheduler-b`` calls ``extender-b``. With
        ``sidecar``, two ``phalanx-scheduler`` replicas, as ``sidecar/`` ships them: the plugin is inside
        kube-scheduler, so there is no second extender.
        """
        if self.sidecar:
            for name in ("kube-scheduler-a", "kube-scheduler-b"):
                self.start_scheduler(name, self.extender_url)
            return
        self.start_extender(name="extender-b", port=self.extender_b_port)
        for name, url in (("kube-scheduler-a", self.extender_url), ("kube-scheduler-b", self.extender_b_url)):
            self.start_scheduler(name, url)

    def start_scheduler(self, name: str, extender_url: str) -> None:
        """Start one more kube-scheduler, leader election on, calling the extender at ``extender_url``.

        The bed's scheduler binary and configuration: with ``sidecar``, ``phalanx-scheduler`` and the
        sidecar's configuration, which calls no extender.
        """
        rendered = render_scheduler_config(
            self.cluster.scheduler_config.read_text(), self.cluster.scheduler_kubeconfig, extender_url
        )
        config = self.state_dir / f"{name}.yaml"
        config.write_text(elect_leader(rendered))
        port = free_port()
        argv = [
            str(self.cluster.scheduler_binary or self.cluster.build() / "kube-scheduler"),
            f"--config={config}",
            f"--authentication-kubeconfig={self.cluster.scheduler_kubeconfig}",
            f"--authorization-kubeconfig={self.cluster.scheduler_kubeconfig}",
            "--bind-address=127.0.0.1",
            f"--secure-port={port}",
            f"--cert-dir={self.state_dir / 'pki' / name}",
            "--v=2",
        ]
        self._spawn(name, argv)
        insecure = ssl.create_default_context()
        insecure.check_hostname = False
        insecure.verify_mode = ssl.CERT_NONE  # its self-signed serving cert; only a probe
        self._wait_http(f"https://127.0.0.1:{port}/healthz", name, timeout=60, context=insecure)

    def kill(self, name: str, sig: int = signal.SIGKILL) -> None:
        """Stop any process this test bed started (``kube-scheduler-a``, ``extender-b``, ...)."""
        self._kill(name, sig)

    def freeze(self, name: str) -> None:
        """Freeze a process this test bed started (SIGSTOP): hung, it holds what it held until it lapses.

        ``kill`` ends it afterwards (SIGKILL ends a stopped process).
        """
        proc = self._procs.get(name)
        if proc is not None:
            os.killpg(proc.pid, signal.SIGSTOP)

    def start_extender(
        self, extra_env: dict[str, str] | None = None, *, name: str = "extender", port: int | None = None
    ) -> None:
        """Start an extender as production does, under gunicorn, and wait for ``/readyz``.

        With ``extender_tls`` it serves HTTPS with a certificate for ``IP:127.0.0.1`` signed by the
        cluster's CA, which kube-scheduler's ``tlsConfig`` trusts (``render_scheduler_config``).
        """
        port = port or self.extender_port
        tls: dict[str, str] = {}
        context = None
        if self.extender_tls:
            key, crt = ensure_serving_cert(
                self.cluster.ca_file.parent, "extender", "/CN=phalanx-extender", ("IP:127.0.0.1",)
            )
            tls = {"PHALANX_TLS_CERT_FILE": str(crt), "PHALANX_TLS_KEY_FILE": str(key)}
            context = ssl.create_default_context(cafile=str(self.cluster.ca_file))
        env = {
            "KUBECONFIG": str(self.kubeconfig),
            "PHALANX_PORT": str(port),
            "PHALANX_BIND_ADDRESS": "127.0.0.1",
            **tls,
            **self.extender_env,
            **(extra_env or {}),
        }
        argv = [
            sys.executable,
            "-m",
            "gunicorn",
            "--config",
            "python:extender.gunicorn_conf",
            "extender.wsgi:create()",
        ]
        self._spawn(name, argv, env)
        scheme = "https" if self.extender_tls else "http"
        self._wait_http(f"{scheme}://127.0.0.1:{port}/readyz", name, timeout=90, context=context)

    def kill_extender(self, sig: int = signal.SIGKILL) -> None:
        """Stop the extender abruptly (crash tests) or gracefully."""
        self._kill("extender", sig)

    def _kill(self, name: str, sig: int) -> None:
        proc = self._procs.pop(name, None)
        if proc is not None:
            os.killpg(proc.pid, sig)
            proc.wait(30)

    def add_nodes(self, specs: Sequence[SimNodeSpec]) -> None:
        """Register simulated nodes and wait until the extender's cache has them."""
        register_all(self.http, specs)

    def set_node_ready(self, name: str, status: str = "Unknown") -> None:
        """Stop a simulated node's kubelet (``Unknown``), make it report not Ready (``False``), or restart it.

        See ``testbed.nodes.set_ready``: the real node lifecycle controller marks and taints the node
        (``Unknown`` after ``node_grace_seconds``), and the simulated kubelet stops acting for its pods
        until it is back (``True``).
        """
        set_ready(self.http, name, status)

    def stop(self) -> None:
        """Stop everything this test bed started, then the control plane."""
        if self.kueue is not None:
            self.kueue.kill()
        for name in list(self._procs):
            proc = self._procs.pop(name)
            try:
                os.killpg(proc.pid, signal.SIGTERM)
                os.killpg(proc.pid, signal.SIGCONT)  # one ``freeze`` left stopped gets the SIGTERM too
                proc.wait(15)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                with contextlib.suppress(ProcessLookupError):  # stopped by someone else meanwhile
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(5)
        for handle in self._files:
            handle.close()
        self._files.clear()
        self.cluster.down()

    def _spawn(self, name: str, argv: list[str], env: dict[str, str] | None = None) -> None:
        log_file = open(self.logs / f"{name}.log", "ab")  # noqa: SIM115 - closed in stop()
        self._files.append(log_file)
        self.log(f"testbed: starting {name} (log: {self.logs / f'{name}.log'})")
        self._procs[name] = subprocess.Popen(
            argv,
            cwd=REPO,
            # MALLOC_ARENA_MAX as the image sets it (Dockerfile): the processes run as in production
            env={**os.environ, "PYTHONUNBUFFERED": "1", "MALLOC_ARENA_MAX": "2", **(env or {})},
            stdout=log_file,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.cluster.record_process(f"testbed-{name}", self._procs[name].pid)

    def _wait_http(
        self, url: str, name: str, *, timeout: float, context: ssl.SSLContext | None = None
    ) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self._check_alive(name)
            try:
                with urllib.request.urlopen(url, timeout=2, context=context) as reply:
                    if reply.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.2)
        msg = f"{name} not ready at {url} after {timeout}s"
        raise RuntimeError(msg)

    def _check_alive(self, name: str) -> None:
        """Raise with the tail of its log if the process ``name`` has exited."""
        proc = self._procs.get(name)
        if proc is not None and proc.poll() is not None:
            tail = (self.logs / f"{name}.log").read_text(errors="replace")[-3000:]
            msg = f"{name} exited with {proc.returncode}:\n{tail}"
            raise RuntimeError(msg)
