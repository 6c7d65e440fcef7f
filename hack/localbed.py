"""The local test bed: the real control plane, the extender under gunicorn and the simulated kubelet.

End-to-end tests, the demo and the benchmarks all run on this. Everything is a real process talking
over loopback: ``hack/localcluster/`` starts etcd, kube-apiserver and kube-scheduler (with the
project's scheduler configuration pointing at the extender); this module starts the extender exactly as
production does (``gunicorn 'extender.wsgi:create()'``) and the simulated kubelet, and registers
simulated GPU nodes.

It is named ``localbed``, beside ``localcluster``, because the top-level package ``testbed/`` holds
the simulated nodes and kubelet it starts, and with ``hack/`` on ``sys.path`` one name cannot be both.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO

from localcluster import LocalCluster

from kubeio.http import KubeHttp, load_api_client
from testbed.nodes import SimNodeSpec, register_all

REPO = Path(__file__).resolve().parents[1]


def free_port() -> int:
    """A TCP port on loopback that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class Testbed:
    """A running control plane, extender and simulated kubelet, with all state in ``state_dir``."""

    __test__ = False  # not a pytest test class, despite the name

    def __init__(
        self,
        state_dir: Path,
        *,
        extender_port: int | None = None,
        extender_env: dict[str, str] | None = None,
        placement_grace: float = 60.0,
        log: Callable[[str], None] = lambda line: print(line, file=sys.stderr, flush=True),
    ) -> None:
        self.state_dir = state_dir
        self.extender_port = extender_port or free_port()
        self.extender_url = f"http://127.0.0.1:{self.extender_port}"
        self.extender_env = extender_env or {}
        self.placement_grace = placement_grace
        self.log = log
        self.cluster = LocalCluster(state_dir, extender_url=self.extender_url, log=log)
        self.logs = state_dir / "logs"
        self._procs: dict[str, subprocess.Popen[bytes]] = {}
        self._files: list[IO[bytes]] = []
        self._http: KubeHttp | None = None

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
        """Start the control plane, simulated kubelet, extender and placement manager; wait for readiness."""
        self.cluster.up()
        self.logs.mkdir(parents=True, exist_ok=True)
        self._spawn(
            "sim-kubelet", [sys.executable, "-m", "testbed.kubelet", "--kubeconfig", str(self.kubeconfig)]
        )
        self.start_extender()
        self.start_placement()

    def start_placement(self) -> None:
        """Start the placement manager; stale gangs are evicted after ``placement_grace`` seconds."""
        argv = [sys.executable, "-m", "placement", "--kubeconfig", str(self.kubeconfig)]
        argv += ["--interval-seconds", "1", "--stale-grace-seconds", str(self.placement_grace)]
        self._spawn("placement", argv)

    def start_extender(self, extra_env: dict[str, str] | None = None) -> None:
        """Start the extender as production does, under gunicorn, and wait for ``/readyz``."""
        env = {
            "KUBECONFIG": str(self.kubeconfig),
            "PHALANX_PORT": str(self.extender_port),
            "PHALANX_BIND_ADDRESS": "127.0.0.1",
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
        self._spawn("extender", argv, env)
        self._wait_http(f"{self.extender_url}/readyz", "extender", timeout=90)

    def kill_extender(self, sig: int = signal.SIGKILL) -> None:
        """Stop the extender abruptly (crash tests) or gracefully."""
        proc = self._procs.pop("extender", None)
        if proc is not None:
            os.killpg(proc.pid, sig)
            proc.wait(30)

    def add_nodes(self, specs: Sequence[SimNodeSpec]) -> None:
        """Register simulated nodes and wait until the extender's cache has them."""
        register_all(self.http, specs)

    def stop(self) -> None:
        """Stop everything this test bed started, then the control plane."""
        for name in list(self._procs):
            proc = self._procs.pop(name)
            try:
                os.killpg(proc.pid, signal.SIGTERM)
                proc.wait(15)
            except (ProcessLookupError, subprocess.TimeoutExpired):
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
            env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
            stdout=log_file,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def _wait_http(self, url: str, name: str, *, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            proc = self._procs.get(name)
            if proc is not None and proc.poll() is not None:
                tail = (self.logs / f"{name}.log").read_text(errors="replace")[-3000:]
                msg = f"{name} exited with {proc.returncode}:\n{tail}"
                raise RuntimeError(msg)
            try:
                with urllib.request.urlopen(url, timeout=2) as reply:
                    if reply.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.2)
        msg = f"{name} not ready at {url} after {timeout}s"
        raise RuntimeError(msg)
