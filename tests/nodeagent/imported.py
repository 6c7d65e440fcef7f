"""Imported ``topo -m`` documents and what an NVML reading of the same machine must agree with.

Every shared ``topo -m`` file (``tests/scheduling/topology/shared_files.py``, with the ``nvlink -s``
file applied to the 8x A6000 matrix, as the shared README pairs them) is turned into a fake NVML, read
back by the agent's reader, and compared with the imported document. NVML knows more than the text, so
the reading is first cut down to the facts the import has (:func:`import_view`):

* ``uuid`` and ``pci_bus_id`` of a GPU whose imported entry lacks them: ``topo -m`` prints neither (only
  ``nvlink -s`` prints UUIDs); the fake synthesises them, and tests compare them with the fake's values;
* the PCIe level of a pair the import shows as ``NV#``: ``topo -m`` prints ``NV#`` *instead of* the level,
  NVML reports both (docs/design/nvlink-topology.md §1); the fake guesses it, and tests compare it
  with the guess;
* pairs the import does not know at all (rows cut off in ``.partial`` files): NVML reads every pair.

Everything else (GPU count and order, NUMA node, CPU affinity, every known pair's NVLink count and PCIe
level, ``nvswitch``, model, compute capability, NVLink generation and rate, PCIe generation) must be
equal as it is.
"""

from __future__ import annotations

from dataclasses import replace

from scheduling.topology import TopologyDocument
from tests.scheduling.topology.shared_files import MATRICES, SharedMatrix, document

__all__ = ["MATRICES", "SharedMatrix", "document", "import_view"]


def import_view(reading: TopologyDocument, imported: TopologyDocument) -> TopologyDocument:
    """``reading`` without the facts ``imported`` cannot have (see the module docstring)."""
    gpus = tuple(
        replace(
            gpu,
            uuid=gpu.uuid if known.uuid is not None else None,
            pci_bus_id=gpu.pci_bus_id if known.pci_bus_id is not None else None,
        )
        for gpu, known in zip(reading.gpus, imported.gpus, strict=True)
    )
    links = []
    for link in reading.links:
        shown = imported.link(link.a, link.b)
        if shown is None:
            continue
        links.append(replace(link, pcie=None) if shown.pcie is None and link.nvlinks else link)
    return replace(reading, gpus=gpus, links=tuple(links))
