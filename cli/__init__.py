"""The ``phalanx`` command-line tool: what the scheduler sees and decides, for people.

Every figure comes from the core (``scheduling``) applied to one read of the cluster (``kubeio``), so the
tool shows what the extender and the placement manager compute, never a second estimate of it.
"""
