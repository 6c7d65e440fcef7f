"""GPUs index by index.

``usage``: which are taken; ``choice``: which a pod gets; ``fit``: which nodes have room for a pod's GPUs
at ``filter``; ``binpack``: how packing ranks nodes; ``fragmentation``: how scattered the free ones are.
"""
