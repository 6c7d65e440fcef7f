"""The benchmark's cluster: the test bed plus a second, extender-free kube-scheduler, and node registration.

Extenders apply to every profile of one kube-scheduler process (docs/design/extender-protocol.md §2.8), so the
comparison needs two processes from the same binary: the test bed's own kube-scheduler, rendered from
``manifests/scheduler-config.yaml`` (profile ``phalanx``, extender configured), and a ``baseline`` one
started here with no extender. Both get the same client QPS/burst, so neither is capped by client-side
rate limiting before it is capped by its own work (the default 50/100 caps binds at 50 pods/s).

Both schedulers can be "paused" so a backlog of pods can be created before they start: the baseline one
simply is not running, and the phalanx one is restarted with a configuration whose only profile has
another name. Measuring from a backlog gives the scheduler's own rate rather than the harness's
pod-creation rate (scheduler_perf measures the same way).
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import ssl
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import IO

import orjson
from localbed import Testbed, free_port, sidecar_config
from workload import ensure_namespace

from kubeio.errors import KubeError
from kubeio.http import KubeHttp, load_api_client
from perf.common import REPO, Progress, children, proc_status, wait_for_idle_cpu
from perf.requests import post_json, probe_pod
from testbed.nodes import RACK_LABEL, ZONE_LABEL, SimNodeSpec, register, topology_from_file

CLIENT_QPS = 5000
"""kube-scheduler ``clientConnection.qps`` for both schedulers: far above what 2 cores can bind."""

CLIENT_BURST = 5000
"""kube-scheduler ``clientConnection.burst`` for both schedulers."""

PAUSED_PROFILE = "phalanx-paused"
"""Profile name of the phalanx scheduler while a backlog is created: no pod asks for it."""

BASELINE_PROFILE = "baseline"
"""Profile name of the extender-free scheduler."""

NATIVE_GANG_GATES = "--feature-gates=GenericWorkload=true,GangScheduling=true"
"""kube-scheduler v1.36's native gang scheduling: the PodGroup API and the GangScheduling plugin."""

NATIVE_GANG_APISERVER_ARGS = (
    "--feature-gates=GenericWorkload=true",
    "--runtime-config=scheduling.k8s.io/v1alpha2=true",
)
"""What the API server needs to serve ``scheduling.k8s.io/v1alpha2`` PodGroups."""

NODES_PER_RACK = 32
"""Simulated nodes per rack label (gang planning prefers one rack), four racks per zone."""


def with_client_limits(text: str) -> str:
    r"""Add ``qps``/``burst`` to a KubeSchedulerConfiguration's ``clientConnection`` block.

    The product's manifest is used as is otherwise, so the phalanx scheduler measured here is the one
    that ships, with only the harness's rate limits added.

    >>> print(with_client_limits("clientConnection:\n  kubeconfig: ''\nprofiles: []\n"))
    clientConnection:
      qps: 5000
      burst: 5000
      kubeconfig: ''
    profiles: []
    <BLANKLINE>
    """
    limits = f"  qps: {CLIENT_QPS}\n  burst: {CLIENT_BURST}\n"
    text, count = re.subn(r"^clientConnection:[ \t]*\n", lambda m: m.group(0) + limits, text, flags=re.M)
    if count != 1:
        msg = "scheduler config has no top-level clientConnection block"
        raise ValueError(msg)
    return text


def plain_config(profile: str, kubeconfig: str) -> str:
    """A KubeSchedulerConfiguration with one profile, no extender, every node scored, no leader election.

    ``kubeconfig`` is either a path or localcluster's ``KUBECONFIG_PATH`` placeholder.
    """
    return (
        "apiVersion: kubescheduler.config.k8s.io/v1\n"
        "kind: KubeSchedulerConfiguration\n"
        "clientConnection:\n"
        f"  kubeconfig: {kubeconfig}\n"
        f"  qps: {CLIENT_QPS}\n"
        f"  burst: {CLIENT_BURST}\n"
        "leaderElection:\n"
        "  leaderElect: false\n"
        "percentageOfNodesToScore: 100\n"
        "profiles:\n"
        f"  - schedulerName: {profile}\n"
    )


def topology_documents() -> list[str]:
    """The GPU topology annotations simulated nodes carry, one per ``hack/topologies/*.txt`` file."""
    files = sorted((REPO / "hack" / "topologies").glob("*.txt"))
    return [topology_from_file(f) for f in files]


def node_specs(start: int, stop: int, documents: Sequence[str]) -> list[SimNodeSpec]:
    """Nodes ``perf-node-<start+1> .. <stop>``: 8 GPUs, topologies in turn, 32 per rack, 4 racks a zone."""
    specs = []
    for i in range(start, stop):
        rack = i // NODES_PER_RACK
        labels = {ZONE_LABEL: f"zone-{rack // 4 + 1}", RACK_LABEL: f"rack-{rack + 1}"}
        topology = documents[i % len(documents)] if documents else None
        specs.append(SimNodeSpec(f"perf-node-{i + 1:05d}", gpus=8, labels=labels, topology=topology))
    return specs


class BenchBed:
    """The test bed, the baseline scheduler and the simulated nodes of one benchmark run.

    ``stop`` stops everything this object started, whatever state the run ended in; call it in a
    ``finally``.
    """

    def __init__(self, state_dir: Path, progress: Progress, *, extender_threads: int) -> None:
        self.state_dir = state_dir
        self.progress = progress
        self.bed = Testbed(
            state_dir / "bed",
            extender_env={"PHALANX_THREADS": str(extender_threads), "PHALANX_LOG_LEVEL": "WARNING"},
            # Thousands of simulated nodes: each Lease renewed every 2 minutes (a 10-minute grace), not
            # every 10 s, or the renewals alone would load the API server beside what is measured.
            node_grace_seconds=600,
            log=progress,
        )
        # kube-scheduler's own gang scheduling, the anchor beside phalanx's gangs (perf.gangs), needs
        # the PodGroup API of scheduling.k8s.io (alpha in v1.36, off by default) in the API server.
        self.bed.cluster.apiserver_args = NATIVE_GANG_APISERVER_ARGS
        self.phalanx_config = state_dir / "phalanx-scheduler-config.yaml"
        self.paused_config = state_dir / "paused-scheduler-config.yaml"
        self.baseline_config = state_dir / "baseline-scheduler-config.yaml"
        self.sidecar_config = state_dir / "sidecar-scheduler-config.yaml"
        self.node_names: list[str] = []
        self._documents = topology_documents()
        self._baseline: subprocess.Popen[bytes] | None = None
        self._baseline_port = 0
        self._baseline_log: IO[bytes] | None = None
        self._phalanx_paused = False
        self._extender_env: dict[str, str] = {}

    @property
    def http(self) -> KubeHttp:
        """The admin API client."""
        return self.bed.http

    @property
    def extender_url(self) -> str:
        """Where the extender listens (plain HTTP on loopback)."""
        return self.bed.extender_url

    def start(self) -> None:
        """Write the scheduler configurations and start the test bed with the phalanx one."""
        self.state_dir.mkdir(parents=True, exist_ok=True)
        product = (REPO / "manifests" / "scheduler-config.yaml").read_text()
        self.phalanx_config.write_text(with_client_limits(product))
        self.paused_config.write_text(plain_config(PAUSED_PROFILE, "KUBECONFIG_PATH"))
        self.sidecar_config.write_text(with_client_limits(sidecar_config(self.bed.plan_key)))
        self.bed.cluster.scheduler_config = self.phalanx_config
        self.bed.start()
        self.baseline_config.write_text(
            plain_config(BASELINE_PROFILE, orjson.dumps(str(self.bed.cluster.scheduler_kubeconfig)).decode())
        )

    # -- nodes ---------------------------------------------------------------------------------------

    def grow_to(self, count: int, *, workers: int = 12) -> float:
        """Register simulated nodes until there are ``count``; return the seconds it took.

        Registration is three API calls per node; a thread pool keeps the API server busy while each
        thread waits for its replies (5,000 nodes one at a time would take many minutes).
        """
        specs = node_specs(len(self.node_names), count, self._documents)
        if not specs:
            return 0.0
        started = time.monotonic()
        done = 0
        lock = threading.Lock()
        http = KubeHttp(load_api_client(str(self.bed.kubeconfig), pool_size=workers * 2), user_agent="perf")

        def one(spec: SimNodeSpec) -> None:
            nonlocal done
            for attempt in range(5):
                try:
                    register(http, spec)
                    break
                except KubeError:
                    if attempt == 4:
                        raise
                    time.sleep(0.5 * (attempt + 1))
            with lock:
                done += 1
                if done % 500 == 0 or done == len(specs):
                    self.progress(f"registered {done}/{len(specs)} new nodes")

        with ThreadPoolExecutor(workers) as pool:
            list(pool.map(one, specs))
        self.node_names += [s.name for s in specs]
        self.wait_extender_knows_nodes()
        wait_for_idle_cpu(self.progress, what="after registering nodes")
        return time.monotonic() - started

    def wait_extender_knows_nodes(self, timeout: float = 300.0) -> None:
        """Wait until a filter call over every node finds none unknown to the extender's cache."""
        body = orjson.dumps({"Pod": probe_pod("perf-probe", 0), "Nodes": None, "NodeNames": self.node_names})
        deadline = time.monotonic() + timeout
        unknown = len(self.node_names)
        while time.monotonic() < deadline:
            reply = post_json(f"{self.extender_url}/filter", body)
            unknown = sum(
                1
                for reasons in (reply.get("FailedNodes") or {}, reply.get("FailedAndUnresolvableNodes") or {})
                for message in reasons.values()
                if "not yet known" in message
            )
            if unknown == 0:
                return
            time.sleep(1.0)
        msg = f"extender still does not know {unknown} nodes after {timeout}s"
        raise RuntimeError(msg)

    # -- schedulers ----------------------------------------------------------------------------------

    def set_extender_env(self, env: dict[str, str]) -> None:
        """Restart the extender with ``env`` added to its environment (nothing if that is its env now).

        The interleaved section measures phalanx's modes this way (``PHALANX_DECISIVE=false``); the
        extender lists the cluster again, and this returns once it knows every node.
        """
        if env == self._extender_env:
            return
        self.bed.kill_extender(signal.SIGTERM)
        self.bed.start_extender(env)
        self._extender_env = dict(env)
        self.wait_extender_knows_nodes()

    def pause_phalanx(self, *, sidecar: bool = False) -> None:
        """Restart the test bed's kube-scheduler with a profile no pod names, so pods of ``phalanx`` wait.

        ``sidecar`` picks the mode the pods created meanwhile are released in (``Testbed.use_sidecar``).
        """
        self._use(sidecar, self.paused_config)
        self._phalanx_paused = True

    def resume_phalanx(self) -> None:
        """Restart the test bed's kube-scheduler with the product configuration (profile ``phalanx``)."""
        self._use(False, self.phalanx_config)
        self._phalanx_paused = False

    def resume_sidecar(self) -> None:
        """Restart the test bed's kube-scheduler as the framework sidecar (paused by ``pause_phalanx``)."""
        self._use(True, self.sidecar_config)
        self._phalanx_paused = False

    def _use(self, sidecar: bool, config: Path) -> None:
        """Phalanx as the framework sidecar or the extender, kube-scheduler restarted with ``config``."""
        was = self.bed.sidecar
        self.bed.use_sidecar(sidecar, scheduler_config=config)
        if was != sidecar:
            self.progress(f"phalanx now runs as {'the framework sidecar' if sidecar else 'the extender'}")

    def start_baseline(self) -> None:
        """Start the extender-free kube-scheduler (profile ``baseline``) from the cached binary."""
        if self._baseline is not None:
            return
        self._baseline, self._baseline_port, self._baseline_log = self.start_scheduler(
            "baseline", self.baseline_config
        )

    def start_scheduler(
        self, name: str, config: Path, extra_args: Sequence[str] = ()
    ) -> tuple[subprocess.Popen[bytes], int, IO[bytes]]:
        """Start one more kube-scheduler from the cached binary with ``config``, and wait for its health.

        ``extra_args`` are more flags (the native gang anchor's feature gates). Returns the process, its
        secure port and its open log; ``stop_scheduler`` stops it.
        """
        port = free_port()
        log_path = self.state_dir / f"{name}-scheduler.log"
        log = open(log_path, "ab")  # noqa: SIM115 - closed in stop_scheduler()
        kubeconfig = str(self.bed.cluster.scheduler_kubeconfig)
        argv = [
            str(self.bed.cluster.bin_dir / "kube-scheduler"),
            f"--config={config}",
            f"--authentication-kubeconfig={kubeconfig}",
            f"--authorization-kubeconfig={kubeconfig}",
            "--bind-address=127.0.0.1",
            f"--secure-port={port}",
            f"--cert-dir={self.state_dir / f'{name}-pki'}",
            f"--v={self.bed.cluster.scheduler_verbosity}",
            *extra_args,
        ]
        env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
        env["NO_PROXY"] = ",".join(filter(None, [env.get("NO_PROXY"), "127.0.0.1", "localhost"]))
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        self.progress(f"started {name} kube-scheduler (pid {proc.pid}, log {log_path})")
        insecure = ssl.create_default_context()
        insecure.check_hostname = False
        insecure.verify_mode = ssl.CERT_NONE  # self-signed serving certificate; this is only a probe
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                tail = log_path.read_text(errors="replace")[-2000:]
                self.stop_scheduler(name, proc, log)
                msg = f"{name} kube-scheduler exited:\n{tail}"
                raise RuntimeError(msg)
            url = f"https://127.0.0.1:{port}/healthz"
            with contextlib.suppress(OSError), urllib.request.urlopen(url, context=insecure, timeout=2):
                return proc, port, log
            time.sleep(0.2)
        self.stop_scheduler(name, proc, log)
        msg = f"{name} kube-scheduler not healthy after 120 s"
        raise RuntimeError(msg)

    def stop_baseline(self) -> None:
        """Stop the extender-free kube-scheduler if it runs (SIGTERM, then SIGKILL after 10 s)."""
        proc, self._baseline = self._baseline, None
        log, self._baseline_log = self._baseline_log, None
        self.stop_scheduler("baseline", proc, log)

    def stop_scheduler(self, name: str, proc: subprocess.Popen[bytes] | None, log: IO[bytes] | None) -> None:
        """Stop a kube-scheduler ``start_scheduler`` started (SIGTERM, then SIGKILL after 10 s)."""
        if proc is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(5)
            self.progress(f"stopped {name} kube-scheduler (pid {proc.pid})")
        if log is not None:
            log.close()

    # -- the extender process ------------------------------------------------------------------------

    def extender_rss_kib(self) -> dict[str, int]:
        """RSS (and peak RSS) of the gunicorn worker that serves the extender, in KiB."""
        proc = self.bed._procs.get("extender")  # the test bed has no public accessor
        if proc is None:
            return {}
        workers = children(proc.pid)
        return proc_status(workers[0]) if workers else proc_status(proc.pid)

    def extender_pids(self) -> list[int]:
        """The gunicorn master and worker pids of the extender (for a profiler to attach to)."""
        proc = self.bed._procs.get("extender")  # the test bed has no public accessor
        return [] if proc is None else [proc.pid, *children(proc.pid)]

    def scheduler_port(self, which: str) -> int | None:
        """The secure port of the ``baseline`` or the ``phalanx`` kube-scheduler, while it runs."""
        if which == "baseline":
            return self._baseline_port if self._baseline is not None else None
        return self.bed.cluster.ports.get("kube-scheduler")

    @property
    def admin_token(self) -> str:
        """A ``system:masters`` bearer token (kube-scheduler's ``/metrics`` and ``/debug/pprof`` take it)."""
        return self.bed.cluster.admin_token

    def processes(self) -> dict[str, list[int]]:
        """Every process of the benchmark cluster by role, for sampling their CPU time.

        Roles: ``kube-scheduler`` (the test bed's, profile ``phalanx``), ``baseline kube-scheduler``,
        ``extender`` (gunicorn master and worker), ``kube-apiserver``, ``etcd``, ``simulated kubelet``,
        ``placement manager``, and ``harness`` (this process: pod creation and the bind watch).
        """
        found: dict[str, list[int]] = {"harness": [os.getpid()]}
        for status in self.bed.cluster.status().processes:
            if status.running and status.pid and status.name in ("kube-apiserver", "etcd", "kube-scheduler"):
                found[status.name] = [status.pid]
        if self._baseline is not None:
            found["baseline kube-scheduler"] = [self._baseline.pid]
        found["extender"] = self.extender_pids()
        for name, role in (("sim-kubelet", "simulated kubelet"), ("placement", "placement manager")):
            proc = self.bed._procs.get(name)  # the test bed has no public accessor
            if proc is not None:
                found[role] = [proc.pid, *children(proc.pid)]
        return found

    # -- pods ----------------------------------------------------------------------------------------

    def namespace(self, name: str) -> str:
        """Create the namespace ``name`` if needed and return it."""
        ensure_namespace(self.http, name)
        return name

    def delete_pods(self, namespace: str, *, timeout: float = 600.0) -> None:
        """Delete every pod of ``namespace`` at once (grace 0) and wait until none is left.

        Namespaces are never deleted: no controller-manager runs here to finish that.
        """
        path = f"/api/v1/namespaces/{namespace}/pods"
        self.http.request(
            "DELETE",
            path,
            body={"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0},
            timeout=timeout,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            left = self.http.request("GET", path, query={"limit": "1"}).get("items") or []
            if not left:
                return
            time.sleep(0.5)
        msg = f"pods of {namespace} still there after {timeout}s"
        raise RuntimeError(msg)

    def stop(self) -> None:
        """Stop the baseline scheduler and everything the test bed started, even after a failure."""
        try:
            self.stop_baseline()
        finally:
            self.bed.stop()
