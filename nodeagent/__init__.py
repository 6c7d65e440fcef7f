"""The node agent: reads the GPU topology through NVML and publishes it as a node annotation.

One agent runs on every GPU node (``manifests/node-agent.yaml``). Each cycle it reads the topology
(:mod:`~nodeagent.nvml_reader`), and when the JSON differs from the node's annotation
``phalanx.io/gpu-topology`` it merge-patches that one annotation (:mod:`~nodeagent.publisher`).
The scheduler reads the annotation back (docs/design/nvlink-topology.md §6). Entry point:
``python -m nodeagent``, a binary of its own: it shares ``kubeio`` and ``scheduling`` with the placement
manager, never code of it.
"""
