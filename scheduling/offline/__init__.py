"""The core without a cluster.

``replay``: a saved filter decision re-run; ``snapshot_file``: the whole cluster saved to a file;
``pending_filter``: the filter asked for the pods still waiting in a snapshot; ``cycle``: one
kube-scheduler cycle of a pod as the extender answers it.
"""
