"""The placement manager's applier of a core ``Plan``: each action's event first, then the action.

Planners in ``scheduling/`` hand out one shape, a ``Plan`` of actions each with its reason
(``scheduling.plan``); this module turns its evictions (reclaim's) and migrations (the elastic pass's)
into API calls. The event is written before the deletion it explains, so that a crash between them
cannot leave a pod gone without a reason. Resizes go out in the elastic pass's one write to each
MPIJob, with what else changed on it (``placement.elastic_pass``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

from kubeio.events import ObjectRef
from kubeio.ports import EventSink, PodDeleter
from scheduling.plan import Eviction, Migration

log = logging.getLogger(__name__)


def apply_evictions(
    evictions: Iterable[Eviction], events: EventSink, deleter: PodDeleter, *, reason: str
) -> tuple[str, ...]:
    """Evict each pod: a Warning event ``reason`` with the eviction's sentence, then the deletion.

    Returns:
        The uids of the pods a deletion was sent for (a pod already gone or replaced is not).
    """
    deleted = []
    for eviction in evictions:
        namespace, _, name = eviction.pod.partition("/")
        log.warning("evicting %s (%s): %s", eviction.pod, eviction.group or "alone", eviction.reason)
        ref = ObjectRef("Pod", "v1", namespace, name, eviction.uid)
        events.record_now(ref, "Warning", reason, eviction.reason)
        if deleter.delete_pod(namespace, name, eviction.uid):
            deleted.append(eviction.uid)
    return tuple(deleted)


def apply_migrations(
    migrations: Iterable[Migration],
    events: EventSink,
    deleter: PodDeleter,
    *,
    about: Callable[[Migration], ObjectRef],
) -> tuple[Migration, ...]:
    """Move each pod: a Normal "Moved" event with its reason on ``about(migration)``, then the deletion.

    ``about`` names the object that owns the pod (an MPIJob): its controller re-creates the pod, which
    is then pinned to the migration's target. Returns the migrations a deletion was sent for.
    """
    moved = []
    for migration in migrations:
        events.record_now(about(migration), "Normal", "Moved", migration.reason)
        namespace, _, name = migration.pod.partition("/")
        if deleter.delete_pod(namespace, name, migration.uid):
            moved.append(migration)
    return tuple(moved)
