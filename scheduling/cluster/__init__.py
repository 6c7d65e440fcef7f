"""The cluster as the core keeps and reads it.

``state``: nodes, pods, PodGroups and Queues (``queue_specs``: each as it is written) updated one change at
a time; ``snapshot``: one immutable
view of all of it per decision; ``usage``: which GPUs of a node are taken; ``room``: what one node has
left for new pods; ``promises``: capacity promised to pods not bound yet; ``statement``: a working copy
of one snapshot's room on which planners try their "what if", committed to a ``scheduling.plan.Plan``.
"""
