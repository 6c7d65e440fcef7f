"""The node side of the local test bed: simulated GPU nodes and a simulated kubelet.

These are programs for end-to-end tests, the demo and the benchmarks, not part of the product, so they
live beside the packages rather than in ``kubeio`` (the adapter the extender and placement manager ship
with) and are left out of the wheel. They are imported from a checkout: pytest and ``python -m`` from the
repository root find them on ``sys.path``, and the scripts in ``hack/`` put the checkout there.
In the layering they are an entrypoint beside ``extender`` and ``placement``: they may use ``kubeio``
and ``scheduling``, and nothing in those packages may use them.
"""
