"""Leader election of the placement manager over an in-memory Lease with versions and conflicts.

Two candidates on one fake clock: the first creates the Lease and leads, the second stands by while it
is renewed, takes over once it stays unrenewed for a whole duration, and the first, unable to renew,
stops acting for good. The real Lease API is exercised end to end in ``tests/e2e/test_placement_ha.py``.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from kubeio.errors import UnavailableError
from placement.election import Leadership
from scheduling.leadership import LeaseRecord
from tests.builders import FakeClock


@dataclass
class Store:
    """The API server's copy of the Lease."""

    record: LeaseRecord | None = None
    writes: list[str] = field(default_factory=list)
    down: bool = False


class FakeLease:
    """A LeaseClient over ``Store``: a write based on an older read conflicts."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.read_version: str | None = None

    def read(self) -> LeaseRecord | None:
        if self.store.down:
            raise UnavailableError(0, "Unavailable", "connection refused")
        self.read_version = self.store.record.version if self.store.record else None
        return self.store.record

    def create(self, holder: str, duration_seconds: int) -> bool:
        if self.store.record is not None:
            return False
        self.store.record = LeaseRecord(holder, duration_seconds, 0, "1")
        self.store.writes.append(f"create {holder}")
        return True

    def write(self, holder: str, duration_seconds: int, *, taking: bool) -> bool:
        current = self.store.record
        if current is None or current.version != self.read_version:
            return False
        transitions = current.transitions + (1 if taking else 0)
        self.store.record = LeaseRecord(holder, duration_seconds, transitions, str(int(current.version) + 1))
        self.store.writes.append(f"{'take' if taking else 'renew'} {holder}")
        return True

    def release(self, holder: str) -> None:
        current = self.store.record
        if current is not None and current.holder == holder:
            self.store.record = LeaseRecord("", current.duration_seconds, current.transitions, "99")
            self.store.writes.append(f"release {holder}")


def candidate(name: str, store: Store, clock: FakeClock) -> Leadership:
    return Leadership(
        FakeLease(store),
        name,
        duration_seconds=15,
        renew_deadline_seconds=10,
        retry_seconds=2,
        clock=clock,
    )


def test_a_standby_takes_over_once_the_lease_lapses_and_the_old_leader_stops_for_good() -> None:
    store, clock = Store(), FakeClock(0.0)
    a, b = candidate("a", store, clock), candidate("b", store, clock)
    a.step()
    b.step()
    assert a.leading.is_set() and not b.leading.is_set()
    for _ in range(10):  # a renews every 2 s: b keeps waiting
        clock.now += 2
        a.step()
        b.step()
    assert not b.leading.is_set() and store.record is not None and store.record.holder == "a"
    store_writes_before = len(store.writes)
    for _ in range(7):  # a stalls (no steps) for 14 s: not yet a whole duration since b saw a renewal
        clock.now += 2
        b.step()
    assert not b.leading.is_set()
    clock.now += 2
    b.step()
    assert b.leading.is_set(), "unrenewed for 16 s >= 15 s"
    assert store.writes[store_writes_before:] == ["take b"]
    a.step()  # a wakes up after 16 s without a renewal: its write conflicts, its deadline (10 s) is past
    assert a.lost.is_set() and not a.leading.is_set()
    assert store.record is not None and store.record.holder == "b" and store.record.transitions == 1


def test_an_unreachable_api_server_makes_the_leader_stop_at_its_deadline_not_before() -> None:
    store, clock = Store(), FakeClock(0.0)
    a = candidate("a", store, clock)
    a.step()
    store.down = True
    for now in (2.0, 4.0, 6.0, 8.0):
        clock.now = now
        a.step()
        assert a.leading.is_set(), f"at {now}s, within the 10 s deadline"
    clock.now = 10.0
    a.step()
    assert a.lost.is_set() and not a.leading.is_set()


def test_a_clean_stop_releases_the_lease_and_the_standby_leads_at_once() -> None:
    store, clock = Store(), FakeClock(0.0)
    a, b = candidate("a", store, clock), candidate("b", store, clock)
    a.step()
    b.step()
    stop = threading.Event()
    stop.set()
    a.run(stop)  # stops at once: gives the Lease up
    assert store.writes[-1] == "release a" and not a.leading.is_set()
    b.step()
    assert b.leading.is_set(), "a released Lease is taken without waiting for it to lapse"
