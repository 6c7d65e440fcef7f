"""Node agent settings: command-line flags that fall back to environment variables, read in one place.

In the DaemonSet everything comes from the environment (``NODE_NAME`` from the downward API); on a
workstation the same values can be given as flags (docs/design/style.md §10).
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from kubeio.config import LOG_LEVEL_ENV, positive_number

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
        SystemExit: a flag or variable has a malformed value, or no node name is given (status 2, with
            argparse's usage message).
    """
    defaults = AgentSettings()
    parser = argparse.ArgumentParser(
        prog="python -m nodeagent",
        description="Publish this node's GPU topology (read through NVML) as a node annotation.",
    )
    parser.add_argument("--node", default=environ.get(ENV_NODE) or None, help=f"node name (${ENV_NODE})")
    parser.add_argument(
        "--kubeconfig",
        default=environ.get(ENV_KUBECONFIG) or None,
        help=f"kubeconfig path (${ENV_KUBECONFIG}; default: in-cluster service account)",
    )
    for flag, env, default, meaning in (
        ("--interval", ENV_INTERVAL, defaults.interval_seconds, "seconds between reads"),
        (
            "--max-backoff",
            ENV_MAX_BACKOFF,
            defaults.max_backoff_seconds,
            "longest wait after failures, seconds",
        ),
        ("--api-timeout", ENV_API_TIMEOUT, defaults.api_timeout_seconds, "API request timeout, seconds"),
    ):
        parser.add_argument(
            flag,
            type=positive_number,
            default=environ.get(env) or default,
            help=f"{meaning} (${env}; default %(default)s)",
        )
    parser.add_argument("--once", action="store_true", help="run one cycle and exit")
    parser.add_argument("--print", dest="print_only", action="store_true", help="print the topology, no API")
    parser.add_argument("--fake-topology", metavar="FILE", help="answer NVML from a topo -m or JSON file")
    parser.add_argument("--fake-gpu-model", metavar="NAME", help="GPU model of a topo -m --fake-topology")
    parser.add_argument(
        "--device-plugin",
        type=_boolean,
        nargs="?",
        const=True,
        default=environ.get(ENV_DEVICE_PLUGIN) or "false",
        help=f"serve phalanx's device plugin for nvidia.com/gpu (${ENV_DEVICE_PLUGIN}; default %(default)s)",
    )
    parser.add_argument(
        "--device-plugin-dir",
        default=environ.get(ENV_DEVICE_PLUGIN_DIR) or DEVICE_PLUGIN_DIR,
        help=f"the kubelet's device-plugin directory (${ENV_DEVICE_PLUGIN_DIR}; default %(default)s)",
    )
    parser.add_argument(
        "--pod-resources-socket",
        default=environ.get(ENV_POD_RESOURCES, POD_RESOURCES_SOCKET),
        help=f"the kubelet's PodResources socket, empty for none (${ENV_POD_RESOURCES}; default %(default)s)",
    )
    parser.add_argument(
        "--truth-interval",
        type=positive_number,
        default=environ.get(ENV_TRUTH_INTERVAL) or defaults.truth_interval_seconds,
        help=f"seconds between reads of what pods hold (${ENV_TRUTH_INTERVAL}; default %(default)s)",
    )
    parser.add_argument(
        "--metrics-port",
        type=_port,
        default=environ.get(ENV_METRICS_PORT) or "0",
        help=f"serve Prometheus metrics on this port, 0 for none (${ENV_METRICS_PORT}; default %(default)s)",
    )
    parser.add_argument(
        "--fake-xid-file", metavar="FILE", help="with --fake-topology: NVML Xid events from FILE"
    )
    parser.add_argument(
        "--log-level",
        default=environ.get(ENV_LOG_LEVEL) or defaults.log_level,
        choices=["DEBUG", "INFO", "WARNING", "ERROR"],
        type=str.upper,
        help=f"logging level (${ENV_LOG_LEVEL}; default %(default)s)",
    )
    args = parser.parse_args(argv)
    if not args.node and not args.print_only:
        parser.error(f"the node name is required: --node or ${ENV_NODE} (the downward API in the DaemonSet)")
    return AgentSettings(
        node_name=args.node,
        kubeconfig=args.kubeconfig,
        interval_seconds=args.interval,
        initial_backoff_seconds=min(defaults.initial_backoff_seconds, args.interval),
        max_backoff_seconds=args.max_backoff,
        api_timeout_seconds=args.api_timeout,
        once=args.once,
        print_only=args.print_only,
        fake_topology=args.fake_topology,
        fake_gpu_model=args.fake_gpu_model,
        log_level=args.log_level,
        device_plugin=args.device_plugin,
        device_plugin_dir=args.device_plugin_dir,
        pod_resources_socket=args.pod_resources_socket,
        truth_interval_seconds=args.truth_interval,
        metrics_port=args.metrics_port,
        fake_xid_file=args.fake_xid_file,
    )


def _boolean(text: object) -> bool:
    """Argparse type: ``true``/``false`` (also ``1``/``0``, ``yes``/``no``), any case.

    Raises:
        argparse.ArgumentTypeError: anything else.
    """
    value = str(text).strip().lower()
    if value in ("true", "1", "yes"):
        return True
    if value in ("false", "0", "no"):
        return False
    msg = f"{text!r} is not true or false"
    raise argparse.ArgumentTypeError(msg)


def _port(text: object) -> int:
    """Argparse type: a TCP port, 0 to 65535 (0: off).

    Raises:
        argparse.ArgumentTypeError: not such a number.
    """
    try:
        value = int(str(text))
    except ValueError:
        msg = f"{text!r} is not a port number"
        raise argparse.ArgumentTypeError(msg) from None
    if not 0 <= value <= 65535:
        msg = f"{text!r} is not a port number (0 to 65535)"
        raise argparse.ArgumentTypeError(msg)
    return value
