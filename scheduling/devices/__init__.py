"""The node side of GPU choice.

``claims``: which GPUs the device plugin prefers for the container the kubelet is admitting; ``truth``:
what each pod really holds against what ``phalanx.io/gpus`` says.
"""
