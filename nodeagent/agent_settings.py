"""Node agent settings: each declared once in :data:`SETTINGS` (flag, variables, type, help).

In the DaemonSet everything comes from the environment (``NODE_NAME`` from the downward API); on a
workstation the same values can be given as flags (docs/design/style.md §10, ``kubeio.setting``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from kubeio.config import LOG_LEVEL, LOG_LEVEL_ENV, PORT, SECONDS, SWITCH
from kubeio.setting import Setting, command, parse

ENV_NODE = "NODE_NAME"
ENV_KUBECONFIG = "KUBECONFIG"
ENV_INTERVAL = "PHALANX_NODE_AGENT_INTERVAL_SECONDS"
ENV_MAX_BACKOFF = "PHALANX_NODE_AGENT_MAX_BACKOFF_SECONDS"
ENV_API_TIMEOUT = "PHALANX_API_TIMEOUT_SECONDS"
ENV_LOG_LEVEL = LOG_LEVEL_ENV
ENV_DEVICE_PLUGIN = "PHALANX_DEVICE_PLUGIN"
ENV_DEVICE_PLUGIN_DIR = "PHALANX_DEVICE_PLUGIN_DIR"
ENV_POD_RESOURCES = "PHALANX_POD_RESOURCES_SOCKET"
ENV_TRUTH_INTERVAL = "PHALANX_TRUTH_INTERVAL_SECONDS"
ENV_METRICS_PORT = "PHALANX_NODE_AGENT_METRICS_PORT"

DEVICE_PLUGIN_DIR = "/var/lib/kubelet/device-plugins"
"""Where the kubelet looks for device plugins (``kubelet.sock`` and the plugins' sockets)."""

POD_RESOURCES_SOCKET = "/var/lib/kubelet/pod-resources/kubelet.sock"
"""The kubelet's PodResources API."""


@dataclass(frozen=True, slots=True)
class AgentSettings:
    """How the node agent runs."""

    node_name: str | None = None
    """The node whose annotation is written (``--node`` / ``NODE_NAME``); only ``--print`` runs without."""

    kubeconfig: str | None = None
    """Path of a kubeconfig; unset means the pod's service account (``--kubeconfig`` / ``KUBECONFIG``)."""

    interval_seconds: float = 60.0
    """Time between reads once a cycle succeeded. Topology changes only when hardware or drivers change,
    so a minute keeps the annotation fresh without loading NVML or the API server."""

    initial_backoff_seconds: float = 5.0
    """Wait after the first failed cycle; it doubles with each further failure."""

    max_backoff_seconds: float = 300.0
    """Longest wait between failed cycles, so thousands of agents do not hammer a struggling API server."""

    api_timeout_seconds: float = 10.0
    """Timeout of one API request."""

    once: bool = False
    """Run one cycle and exit: 0 if it published or found nothing to change, 1 otherwise."""

    print_only: bool = False
    """Read the topology, print its JSON and exit without touching the API (for operators)."""

    fake_topology: str | None = None
    """Read from a fake NVML built from this file (``topo -m`` text or document JSON), not the driver."""

    fake_gpu_model: str | None = None
    """The GPU model of a ``topo -m`` fake topology (``topo -m`` does not print it)."""

    log_level: str = "INFO"
    """Python logging level (``PHALANX_LOG_LEVEL``)."""

    device_plugin: bool = False
    """Serve phalanx's device plugin for ``nvidia.com/gpu`` (``--device-plugin`` /
    ``PHALANX_DEVICE_PLUGIN=true``): the mode in which the container gets the GPUs phalanx chose. Off,
    another plugin (NVIDIA's) allocates and the agent only reads back what it gave."""

    device_plugin_dir: str = DEVICE_PLUGIN_DIR
    """The kubelet's device-plugin directory (``--device-plugin-dir``)."""

    pod_resources_socket: str = POD_RESOURCES_SOCKET
    """The kubelet's PodResources socket (``--pod-resources-socket``); empty: do not read the truth."""

    truth_interval_seconds: float = 1.0
    """Time between reads of what each pod really holds (an ``Allocate`` triggers one at once)."""

    metrics_port: int = 0
    """Serve Prometheus metrics on this port (``--metrics-port``); 0: none."""

    fake_xid_file: str | None = None
    """With ``--fake-topology``: NVML events come from this file (lines ``<gpu index> <xid>``)."""


def parse_settings(argv: Sequence[str] | None, environ: Mapping[str, str]) -> AgentSettings:
    """Read flags, falling back to ``environ`` for each one that has an environment variable.

    Raises:
        SystemExit: ``--help`` (status 0); a flag or variable has a malformed value, or no node name is
            given (status 2, with click's usage message).
    """
    settings: AgentSettings = parse(COMMAND, argv, environ, prog="python -m nodeagent")
    backoff = min(AgentSettings().initial_backoff_seconds, settings.interval_seconds)
    return dataclasses.replace(settings, initial_backoff_seconds=backoff)


def _no_node(settings: AgentSettings) -> str | None:
    """Why the settings cannot run: no node to write, unless only printing."""
    if settings.node_name or settings.print_only:
        return None
    return f"the node name is required: --node or ${ENV_NODE} (the downward API in the DaemonSet)"


SETTINGS = (
    Setting("node_name", "--node", (ENV_NODE,), help="node name"),
    Setting("kubeconfig", "--kubeconfig", (ENV_KUBECONFIG,), help="kubeconfig path; unset: in-cluster"),
    Setting("interval_seconds", "--interval", (ENV_INTERVAL,), SECONDS, "seconds between reads"),
    Setting(
        "max_backoff_seconds",
        "--max-backoff",
        (ENV_MAX_BACKOFF,),
        SECONDS,
        "longest wait after failures, seconds",
    ),
    Setting(
        "api_timeout_seconds", "--api-timeout", (ENV_API_TIMEOUT,), SECONDS, "API request timeout, seconds"
    ),
    Setting("once", "--once", switch=True, help="run one cycle and exit"),
    Setting("print_only", "--print", switch=True, help="print the topology, no API"),
    Setting(
        "fake_topology", "--fake-topology", help="answer NVML from a topo -m or JSON file", metavar="FILE"
    ),
    Setting(
        "fake_gpu_model", "--fake-gpu-model", help="GPU model of a topo -m --fake-topology", metavar="NAME"
    ),
    Setting(
        "device_plugin",
        "--device-plugin",
        (ENV_DEVICE_PLUGIN,),
        SWITCH,
        "serve phalanx's device plugin for nvidia.com/gpu (the flag alone: true)",
        bare=True,
        metavar="BOOLEAN",
    ),
    Setting(
        "device_plugin_dir",
        "--device-plugin-dir",
        (ENV_DEVICE_PLUGIN_DIR,),
        help="the kubelet's device-plugin directory",
    ),
    Setting(
        "pod_resources_socket",
        "--pod-resources-socket",
        (ENV_POD_RESOURCES,),
        help="the kubelet's PodResources socket; empty (the variable too): do not read what pods hold",
        empty=True,
    ),
    Setting(
        "truth_interval_seconds",
        "--truth-interval",
        (ENV_TRUTH_INTERVAL,),
        SECONDS,
        "seconds between reads of what pods hold",
    ),
    Setting("metrics_port", "--metrics-port", (ENV_METRICS_PORT,), PORT, "Prometheus metrics port; 0: none"),
    Setting(
        "fake_xid_file",
        "--fake-xid-file",
        help="with --fake-topology: NVML Xid events from FILE",
        metavar="FILE",
    ),
    Setting("log_level", "--log-level", (ENV_LOG_LEVEL,), LOG_LEVEL, "logging level"),
)
"""Every setting of the node agent, once: ``python -m nodeagent --help`` is built from it."""

COMMAND = command(
    SETTINGS,
    AgentSettings(),
    about="Publish this node's GPU topology (read through NVML) as a node annotation.",
    check=_no_node,
)
