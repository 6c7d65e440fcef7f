"""Scheduling policies the loop can run, registered by name in one visible list.

``phalanx`` decides through the product's core (``scheduling``); each ``phalanx-no-*`` is phalanx with
one rule switched off, so that the table shows what that rule moved; ``phalanx-even`` sizes elastic
jobs by the even rule that came before the learned throughput model. ``fifo`` and ``tiresias`` are the
baselines.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

from scheduling.elastic import ElasticSettings
from scheduling.queues import Queue
from scheduling.topology import TopologyDocument
from simulator.loop import Policy
from simulator.policies.fifo import Fifo
from simulator.policies.phalanx import Phalanx
from simulator.policies.tiresias import Tiresias

POLICIES: Mapping[str, Callable[[], Policy[Any]]] = {
    "phalanx": Phalanx,
    "phalanx-no-elastic": partial(Phalanx, name="phalanx-no-elastic", elastic=False),
    "phalanx-no-topology": partial(Phalanx, name="phalanx-no-topology", topology=False),
    "phalanx-no-reclaim": partial(Phalanx, name="phalanx-no-reclaim", reclaim=False),
    "phalanx-even": partial(Phalanx, name="phalanx-even", elastic_settings=ElasticSettings(sizing="even")),
    "fifo": Fifo,
    "tiresias": Tiresias,
}
"""Policy name -> a factory of the policy with its default parameters."""


def for_rigid_trace(
    name: str,
    queues: tuple[Queue, ...],
    documents: tuple[TopologyDocument | None, ...] = (),
    rack_size: int = 0,
) -> Callable[[], Policy[Any]]:
    """Phalanx policies get the queues, rigid jobs and the nodes' topology documents and racks.

    Philly and openb jobs do not scale, hence rigid; baselines ignore all of it (they place by node
    index, and the loop gives them the lowest free GPU indices).
    """
    factory = POLICIES[name]
    if (isinstance(factory, partial) and factory.func is Phalanx) or factory is Phalanx:
        keywords = factory.keywords if isinstance(factory, partial) else {}
        extra: dict[str, Any] = {"elastic": False, "queues": queues}
        if documents:
            extra |= {"documents": documents, "rack_size": rack_size}
        return partial(Phalanx, **{**keywords, **extra})
    return factory
