"""The adapter to the Kubernetes API: the only package that imports ``kubernetes``.

It owns list/watch caches, Bindings, patches and events, converts API JSON into the core's model, and
raises its own error types (``kubeio.errors``) so callers never handle the client library's exceptions.
"""
