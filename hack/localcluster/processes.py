"""Processes on this machine: start them detached, recognise them by pid and start time, stop them.

A cluster outlives the command that started it (``hack/cluster up`` returns; ``down`` runs in another
process), so nothing here holds a process handle: a process is known by its pid plus the start time in
``/proc/<pid>/stat``, which a recycled pid never matches. Also here: free loopback ports, a proxy-free
HTTP probe for readiness, and the file lock that serializes builds and starts.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import os
import random
import signal
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from localcluster.errors import ClusterError

STOP_GRACE_SECONDS = 10.0
"""How long ``down`` waits after SIGTERM before it sends SIGKILL."""


@dataclasses.dataclass
class Started:
    """A process started by this package, with what is needed to stop exactly it."""

    name: str
    pid: int
    start_time: int


@contextlib.contextmanager
def flock(path: Path, log: Callable[[str], None], what: str) -> Iterator[None]:
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


def proc_stat(pid: int) -> tuple[str, int] | None:
    """Return (state, start time in clock ticks) of ``pid`` from /proc, or None if gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    # The command name (field 2) may contain spaces and parentheses; fields after it don't.
    fields = raw[raw.rfind(")") + 2 :].split()
    return fields[0], int(fields[19])  # field 3 (state) and field 22 (starttime)


def alive(pid: int, start_time: int) -> bool:
    """Whether ``pid`` is still the very process we started (not a recycled pid, no zombie)."""
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)  # reap it if it is our exited child
    stat = proc_stat(pid)
    return stat is not None and stat[0] not in ("Z", "X") and stat[1] == start_time


def stop_process(pid: int, start_time: int, grace: float = STOP_GRACE_SECONDS) -> bool:
    """SIGTERM the process, SIGKILL it after ``grace`` seconds; return whether it was running."""
    if not alive(pid, start_time):
        return False
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        if not alive(pid, start_time):
            return True
        time.sleep(0.1)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 5
    while alive(pid, start_time) and time.monotonic() < deadline:
        time.sleep(0.05)
    if alive(pid, start_time):
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


_LISTEN = "0A"
"""The state of a listening socket in ``/proc/net/tcp``."""


def port_holder(port: int, proc: Path = Path("/proc")) -> str | None:
    """Which process listens on TCP ``port`` (any address): ``"pid N (command line)"``, or None if none does.

    The kernel lists listening sockets with their inode in ``/proc/net/tcp`` and ``tcp6``; the process
    holding one has a descriptor linking to ``socket:[inode]``. A listener whose process this user may
    not look into is still reported, as ``"a process this user cannot see"``.
    """
    inodes = set()
    for table in ("tcp", "tcp6"):
        try:
            rows = (proc / "net" / table).read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            if len(fields) > 9 and fields[3] == _LISTEN and int(fields[1].rpartition(":")[2], 16) == port:
                inodes.add(f"socket:[{fields[9]}]")
    if not inodes:
        return None
    for fd_dir in proc.glob("[0-9]*/fd"):
        if not _links(fd_dir) & inodes:
            continue
        try:
            argv = (fd_dir.parent / "cmdline").read_bytes().split(b"\0")
        except OSError:
            argv = []
        command = " ".join(b" ".join(argv).decode(errors="replace").split()) or "?"  # one line
        return f"pid {fd_dir.parent.name} ({command[:200]})"
    return "a process this user cannot see"


def _links(fd_dir: Path) -> set[str]:
    """What each descriptor in ``/proc/<pid>/fd`` points at; those that close meanwhile are skipped."""
    links: set[str] = set()
    try:
        fds = list(fd_dir.iterdir())
    except OSError:  # the process is gone, or not ours to look into
        return links
    for fd in fds:
        with contextlib.suppress(OSError):
            links.add(os.readlink(fd))
    return links


def pick_port(preferred: int | None, taken: set[int]) -> int:
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


def tail(path: Path, lines: int = 40) -> str:
    """Return the last ``lines`` lines of a log file for error messages."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return "(no log)"
    return "\n".join(text.splitlines()[-lines:])


_NO_PROXY_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))
"""Talks to loopback directly even when the environment sets HTTP(S)_PROXY."""


def http_get(
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


def spawn_detached(name: str, argv: Sequence[str], log_path: Path, cwd: Path) -> Started:
    """Start one component detached, appending its output to ``log_path``.

    A throwaway ``sh`` starts the component in the background and exits, so the
    component is not our child: it outlives ``hack/cluster up``, leaves no zombie and no
    ``subprocess.Popen`` behind (whose ResourceWarning pytest would turn into an error).
    It also runs in its own session, so a Ctrl-C aimed at the caller does not reach it.

    Raises:
        ClusterError: If the component could not be started or exited at once.
    """
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
        cwd=cwd,
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
    stat = proc_stat(pid)
    if stat is None or stat[0] in ("Z", "X"):
        msg = f"{name} exited immediately; last lines of {log_path}:\n{tail(log_path)}"
        raise ClusterError(msg)
    return Started(name, pid, stat[1])
