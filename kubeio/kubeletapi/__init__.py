"""The kubelet's node-local gRPC APIs: the device plugin API (v1beta1) and the PodResources API (v1).

``*.proto`` are phalanx's own statements of the public wire format; ``*_pb2.py``/``*_pb2.pyi`` are
generated from them by ``hack/protos`` and checked in (the image needs no code generator; a test fails
when they drift from the ``.proto``); :mod:`kubeio.kubeletapi.services` is the typed service glue.
"""
