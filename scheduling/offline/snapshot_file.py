"""Save the whole cluster as the core sees it to one file, and read it back (``phalanx snapshot save``).

A saved filter decision (``scheduling.offline.replay``) answers "why did phalanx turn this pod down then?"; a
snapshot answers "what would phalanx decide now, for every pod still waiting?" and lets anyone ask it
offline, with no cluster, through the same core (``scheduling.offline.pending_filter``). It is the decision
format without the decision: the same version number and the same records for nodes (with their
topology documents), pods, PodGroups and Queues, plus ``"kind": "snapshot"``, the wall-clock time it
was taken (the ``now`` a replay decides at) and the session settings a replay uses.

What a snapshot cannot hold: the extender's promises (binds in flight, gang reservations) and the
groups its queue hold admitted since its queue view was built. They live only in the extender's
memory; a replay of a snapshot decides as if there were none. The settings are the defaults unless the
caller passes the extender's (its environment is not visible from outside).
"""

from __future__ import annotations

from dataclasses import dataclass

import msgspec

from scheduling.cluster.snapshot import ClusterSnapshot
from scheduling.offline.replay import (
    FORMAT,
    SNAPSHOT,
    ReplayError,
    SavedCluster,
    encode_hook,
    restore_cluster,
    saved_cluster,
    saved_kind,
)
from scheduling.session import SessionSettings
from scheduling.topology import TopologyCache, TopologyError


@dataclass(frozen=True)
class SavedSnapshot:
    """The file: format, kind, when it was taken, the cluster and the settings to decide with."""

    format: int
    kind: str
    taken: float
    cluster: SavedCluster
    settings: SessionSettings


@dataclass(frozen=True, slots=True)
class LoadedSnapshot:
    """A snapshot file read back.

    Attributes:
        snapshot: the cluster, topologies prepared again.
        taken: seconds since the epoch when it was saved.
        settings: the settings to decide with.
    """

    snapshot: ClusterSnapshot
    taken: float
    settings: SessionSettings


def save_snapshot(
    snapshot: ClusterSnapshot, *, taken: float, settings: SessionSettings | None = None
) -> bytes:
    """``snapshot`` as a file's JSON, taken at ``taken`` (seconds since the epoch).

    Everything is sorted (nodes, pods and PodGroups by key, Queues by name), so the same cluster gives
    the same bytes.
    """
    saved = SavedSnapshot(FORMAT, SNAPSHOT, taken, saved_cluster(snapshot), settings or SessionSettings())
    return msgspec.json.encode(saved, enc_hook=encode_hook)


def load_snapshot(data: bytes, topologies: TopologyCache) -> LoadedSnapshot:
    """Read a snapshot file back.

    Raises:
        ReplayError: ``data`` is not a snapshot file of this format (a saved decision included), or is
            malformed.
    """
    if saved_kind(data) != SNAPSHOT:
        msg = "the file is a saved decision, not a cluster snapshot"
        raise ReplayError(msg)
    try:
        saved = msgspec.json.decode(data, type=SavedSnapshot)
        snapshot = restore_cluster(saved.cluster, topologies)
    except (msgspec.ValidationError, TopologyError) as exc:
        msg = f"snapshot is malformed: {exc}"
        raise ReplayError(msg) from exc
    return LoadedSnapshot(snapshot, saved.taken, saved.settings)
