"""The placement manager's applier: each action's event is written before the deletion it explains."""

from __future__ import annotations

from dataclasses import dataclass, field

from kubeio.events import ObjectRef
from placement.plan_applier import apply_evictions, apply_migrations
from scheduling.plan import Eviction, Migration
from tests.builders import FakeEvents


@dataclass
class Deleter:
    """Deletes what it is told, noting how many events were written by then; a pod in ``gone`` is gone."""

    events: FakeEvents
    gone: frozenset[str] = frozenset()
    deleted: list[tuple[str, int]] = field(default_factory=list)

    def delete_pod(self, namespace: str, name: str, uid: str, *, grace_seconds: int | None = None) -> bool:
        self.deleted.append((f"{namespace}/{name}", len(self.events.events)))
        return uid not in self.gone


def test_each_eviction_is_told_on_its_pod_before_its_deletion_and_a_pod_gone_is_not_counted() -> None:
    events = FakeEvents()
    deleter = Deleter(events, gone=frozenset({"u2"}))
    reason = "evicted whole with ml/b: reclaim"
    evictions = [Eviction(f"ml/b-{i}", f"u{i}", "n1", reason, "ml/b") for i in (1, 2)]
    assert apply_evictions(evictions, events, deleter, reason="Reclaimed") == ("u1",)
    assert deleter.deleted == [("ml/b-1", 1), ("ml/b-2", 2)], "each deletion after its own event"
    assert events.events == [("Pod", f"b-{i}", "Warning", "Reclaimed", reason) for i in (1, 2)]


def test_each_migration_is_told_on_its_owner_before_its_deletion() -> None:
    events = FakeEvents()
    deleter = Deleter(events)
    move = Migration("ml/j-worker-3", "u3", "n7", "n2", (0,), "moved j-worker-3 from n7 to n2")
    owner = ObjectRef("MPIJob", "kubeflow.org/v2beta1", "ml", "j", "uid-j")
    assert apply_migrations([move], events, deleter, about=lambda _m: owner) == (move,)
    assert deleter.deleted == [("ml/j-worker-3", 1)]
    assert events.events == [("MPIJob", "j", "Normal", "Moved", "moved j-worker-3 from n7 to n2")]
