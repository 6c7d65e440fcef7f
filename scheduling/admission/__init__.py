"""Admission: whether a group may start now (its queue's rules, and with gates the room), at two moments.

Two moments, one concept. At ``filter`` the queue hold (``queue_hold``) turns a pod down while its group
may not start yet; for pods created gated (the admission gate, ``phalanx.io/admission``) the release pass
(``release``, with ``flight``, ``reserve``, ``preemption`` and ``outcome``) decides which groups leave the
gate and enter kube-scheduler's queue.
"""
