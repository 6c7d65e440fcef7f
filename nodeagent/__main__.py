"""Composition root of the node agent: ``python -m nodeagent [--node NAME] ...``.

The only place that builds real objects: settings from flags and environment, the NVML module (the real
``pynvml``, or a fake built from a file for machines without GPUs), the API client, the publisher and the
loop, the node-side duties (what pods really hold, GPU health, the device plugin: ``nodeagent.node_side``)
and the SIGTERM/SIGINT handlers that stop the loop after the current cycle.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path

import pynvml

from kubeio.config import configure_logging
from kubeio.http import KubeHttp, load_api_client
from kubeio.node_annotations import NodeAnnotations
from nodeagent.agent import Backoff, CycleOutcome, NodeAgent
from nodeagent.agent_settings import AgentSettings, parse_settings
from nodeagent.fake_nvml import FakeNvml
from nodeagent.gpu_health import NvmlEvents
from nodeagent.node_side import NodeSide
from nodeagent.nvml_api import NvmlModule
from nodeagent.nvml_reader import NvmlTopologyReader
from nodeagent.publisher import TopologyPublisher
from scheduling.topology import TopologyDocument, from_json, parse_topo_matrix

log = logging.getLogger("nodeagent")


def main(argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None) -> int:
    """Run the agent; returns the process exit status."""
    settings = parse_settings(argv, os.environ if environ is None else environ)
    configure_logging(settings.log_level)
    nvml = nvml_module(settings)
    reader = NvmlTopologyReader(nvml, log=logging.getLogger("nodeagent.nvml"))
    if settings.print_only:
        reading = reader.read()
        if reading.document is None:
            print(f"no topology: {reading.status.value}: {reading.detail}", file=sys.stderr)
            return 1
        print(reading.document.to_json())
        return 0
    assert settings.node_name is not None  # parse_settings insists on it without --print
    http = KubeHttp(load_api_client(settings.kubeconfig, pool_size=8), user_agent="phalanx-node-agent")
    publisher = TopologyPublisher(
        NodeAnnotations(http, timeout=settings.api_timeout_seconds), settings.node_name, log=log
    )
    agent = NodeAgent(
        reader.read,
        publisher,
        interval=settings.interval_seconds,
        backoff=Backoff(settings.initial_backoff_seconds, settings.max_backoff_seconds),
        log=log,
    )
    if settings.once:
        return 0 if agent.run_once() is not CycleOutcome.FAILED else 1
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    events: NvmlEvents = nvml  # type: ignore[assignment]  # pynvml and the fake have the event calls too
    NodeSide(settings, http, reader.read, events).start(stop)
    agent.run(stop)
    return 0


def nvml_module(settings: AgentSettings) -> NvmlModule:
    """The real ``pynvml``, or with ``--fake-topology`` a fake answering from that file."""
    if settings.fake_topology is None:
        nvml: NvmlModule = pynvml
        return nvml
    log.warning("answering NVML calls from %s, not from the driver", settings.fake_topology)
    return FakeNvml(
        load_topology(Path(settings.fake_topology), settings.fake_gpu_model), xid_file=settings.fake_xid_file
    )


def load_topology(path: Path, gpu_model: str | None) -> TopologyDocument:
    """A document from a file holding either its JSON or ``nvidia-smi topo -m`` output.

    Raises:
        OSError: the file cannot be read.
        TopologyError: the text is neither.
    """
    text = path.read_text(encoding="utf-8")
    if text.lstrip().startswith("{"):
        return from_json(text.strip())
    return parse_topo_matrix(text, gpu_model=gpu_model)


if __name__ == "__main__":
    sys.exit(main())
