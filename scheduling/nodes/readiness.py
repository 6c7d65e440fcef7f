"""Dead and drained nodes: what filter turns down, which gang members are lost, which promises end.

Kubernetes states a node's health in two places, and they mean different things to phalanx:

- the ``Ready`` condition: ``False`` when the kubelet reports the node unhealthy, ``Unknown`` when the
  node lifecycle controller stopped hearing from the kubelet. The API keeps showing the node's pods
  Running until that controller evicts them (after the default 300 s tolerations), but their peers
  wait on them in vain: for a gang, a member there is lost. A deleted node's pods are lost at once.
- ``spec.unschedulable``: cordoned by an admin (``kubectl cordon``, ``kubectl drain``). Nothing new
  goes there, but what runs there keeps running: a drain evicts pods itself.

So filter turns down a not-ready, cordoned or unknown node for every pod, with a reason a user can read
(``split_candidates``); a gang member on a not-ready or deleted node counts as lost
(``member_loss``, read by ``scheduling.gang.status``); and GPUs promised on a not-ready or deleted node
will never be used, so those promises end, a gang's whole reservation with them, so the gang is planned
again whole (``promises_ended``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import MappingProxyType

from scheduling import reasons
from scheduling.cluster.promises import Promise, PromiseBook
from scheduling.model import MAX_NODE_GPUS, Node
from scheduling.reasons import Rejection

_NOTHING: Mapping[str, Rejection] = MappingProxyType({})


def node_rejection(node: Node | None) -> Rejection | None:
    """Why no pod may be placed on ``node`` now, whatever it asks for; ``None`` when one may.

    >>> from scheduling.model import Resources
    >>> node_rejection(Node("n1", Resources(gpus=8), ready=False)).reason.value
    'not_ready'
    >>> node_rejection(Node("n1", Resources(gpus=8))) is None
    True
    """
    if node is None:
        return reasons.unknown_node()
    if not node.ready:
        return reasons.not_ready()
    if node.unschedulable:
        return reasons.cordoned()
    if node.gpu_problem is not None:
        return reasons.gpus_refused(MAX_NODE_GPUS)
    return None


def split_candidates(
    candidates: Iterable[str], nodes: Mapping[str, Node]
) -> tuple[tuple[str, ...], Mapping[str, Rejection]]:
    """Split kube-scheduler's candidates into the nodes a pod may go to and the rest, with reasons.

    The first part keeps the candidates' order (duplicates once when any node is turned down; as sent
    otherwise); the second holds every candidate that is unknown, not ready, cordoned or refused.
    """
    names = tuple(candidates)
    get = nodes.get
    bad: dict[str, Rejection] = {}
    for name in names:  # the hot path: thousands of candidates, nearly always all healthy
        node = get(name)
        if node is None or not node.ready or node.unschedulable or node.gpu_problem is not None:
            rejection = node_rejection(node)
            if rejection is not None:
                bad[name] = rejection
    if not bad:
        return names, _NOTHING
    return tuple(name for name in dict.fromkeys(names) if name not in bad), MappingProxyType(bad)


def member_loss(node_name: str | None, nodes: Mapping[str, Node] | None) -> str | None:
    """Why a pod bound to ``node_name`` is lost with its node (``not Ready``, ``deleted``), if it is.

    ``nodes`` is ``None`` when the driver has not listed nodes yet: then no pod is lost to its node
    (an empty cache must not look like a cluster whose nodes were all deleted). A cordoned node loses
    nothing: its pods keep running.

    >>> from scheduling.model import Resources
    >>> nodes = {"n1": Node("n1", Resources(gpus=8), ready=False)}
    >>> member_loss("n1", nodes), member_loss("n2", nodes), member_loss("n2", None)
    ('not Ready', 'deleted', None)
    """
    if node_name is None or nodes is None:
        return None
    node = nodes.get(node_name)
    if node is None:
        return "deleted"
    return None if node.ready else "not Ready"


def promises_ended(
    book: PromiseBook, name: str, node: Node | None
) -> tuple[PromiseBook, tuple[Promise, ...]]:
    """End the promises that ``node`` (now ``None``: deleted) can no longer keep.

    A node that is not ready or is gone ends every promise on it, and a gang member's promise ends its
    whole gang's reservation: half a gang must not keep GPUs elsewhere while it waits for a node that
    will not come back, and its next filter plans it whole. A cordoned node keeps its promises: the pods
    being bound there can still run. Returns the new book and the ended promises, sorted by pod.
    """
    if name not in book.by_node or (node is not None and node.ready):
        return book, ()
    on_node = [p for p in book.by_uid.values() if p.node == name]
    uids = {p.pod_uid for p in on_node}
    for group in sorted({p.group for p in on_node if p.group is not None}):
        uids |= book.by_group.get(group, frozenset())
    if not uids:
        return book, ()
    ended = tuple(sorted((book.by_uid[u] for u in uids), key=lambda p: (p.pod_key, p.pod_uid)))
    kept = {uid: p for uid, p in book.by_uid.items() if uid not in uids}
    return PromiseBook.of(kept), ended
