"""GPUs index by index.

``choice``: which a pod gets (which are taken is ``scheduling.cluster.usage``); ``fit``: which nodes
have room for a pod's GPUs at ``filter``; ``binpack``: how packing ranks nodes; ``fragmentation``: how
scattered the free ones are.
"""
