"""Nodes as the core models them.

``constraints``: kube-scheduler's own node filters (taints, selector, affinity, room); ``readiness``: dead
and drained nodes; ``ranking``: the order of candidate nodes for one pod; ``table``: every node's GPUs,
index by index, for the CLI (what a node has left for new pods is ``scheduling.cluster.room``).
"""
