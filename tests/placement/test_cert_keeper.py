"""The Secret of internal certificates: written when needed, and never fought over.

The store here answers as the API server does, including its 409s, so each race is played out exactly:
a replica whose create or update is refused reads again and serves what the other wrote. The same races
against the real API server are in tests/e2e/test_webhook_certs.py.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime

import pytest

from kubeio.errors import KubeError
from kubeio.secrets import StoredSecret
from placement.cert_keeper import MANAGED_BY, CertKeeper, CertKeeperError
from placement.certificates import renew

NAMES = ["127.0.0.1"]
NOW = datetime(2030, 1, 1, tzinfo=UTC)


@dataclass
class Store:
    """One Secret with a version; ``interleave`` runs once before the first write (another replica)."""

    data: dict[str, bytes] | None = None
    version: int = 0
    interleave: list[dict[str, bytes]] = field(default_factory=list)
    writes: list[str] = field(default_factory=list)
    forbid_create: bool = False

    def read(self, namespace: str, name: str) -> StoredSecret | None:
        if self.data is None:
            return None
        return StoredSecret(
            namespace, name, dict(self.data), {"metadata": {"resourceVersion": str(self.version)}}
        )

    def _other_writes_first(self) -> None:
        if self.interleave:
            self.data, self.version = self.interleave.pop(0), self.version + 1

    def create(self, namespace: str, name: str, data: Mapping[str, bytes], labels: Mapping[str, str]) -> bool:
        assert labels == MANAGED_BY
        if self.forbid_create:
            raise KubeError(403, "Forbidden", "secrets is forbidden: cannot create")
        self._other_writes_first()
        if self.data is not None:
            self.writes.append("create refused")
            return False
        self.data, self.version = dict(data), self.version + 1
        self.writes.append("created")
        return True

    def update(self, secret: StoredSecret, data: Mapping[str, bytes]) -> bool:
        self._other_writes_first()
        if secret.raw["metadata"]["resourceVersion"] != str(self.version):
            self.writes.append("update refused")
            return False
        self.data, self.version = dict(data), self.version + 1
        self.writes.append("updated")
        return True


def keeper(store: Store) -> CertKeeper:
    return CertKeeper(store, "phalanx-system", "certs", names=NAMES, clock=lambda: NOW)


def other_replicas() -> dict[str, bytes]:
    renewal = renew(None, NAMES, NOW)
    assert renewal is not None
    return renewal.certs.to_data()


def test_a_missing_secret_is_created_and_then_only_read() -> None:
    store = Store()
    first = keeper(store).sync()
    assert store.writes == ["created"]
    assert keeper(store).sync() == first and store.writes == ["created"], "a second replica reads it"
    assert keeper(store).serving() is None, "nothing served before a sync"


@pytest.mark.parametrize("shipped_empty", [False, True])
def test_a_replica_that_loses_the_race_serves_what_the_other_wrote(shipped_empty: bool) -> None:
    theirs = other_replicas()
    store = Store(data={} if shipped_empty else None, interleave=[theirs])
    kept = keeper(store)
    certs = kept.sync()
    assert store.writes == ["update refused" if shipped_empty else "create refused"]
    assert certs.to_data() == theirs
    assert kept.serving() == certs.serving


def test_a_secret_that_keeps_changing_is_an_error_not_a_loop() -> None:
    store = Store(data={}, interleave=[{}, {}, {}])
    with pytest.raises(CertKeeperError, match="changed under every one of 3 attempts"):
        keeper(store).sync()


def test_a_secret_that_may_not_be_created_says_so() -> None:
    with pytest.raises(KubeError, match="403 Forbidden"):
        keeper(Store(forbid_create=True)).sync()


def test_certificates_for_other_names_are_renewed_under_the_same_ca() -> None:
    store = Store(data=other_replicas())
    before = dict(store.data or {})
    certs = CertKeeper(store, "phalanx-system", "certs", names=["10.0.0.9"], clock=lambda: NOW).sync()
    assert store.writes == ["updated"]
    assert certs.ca_bundle == before["ca.crt"] and certs.serving.cert != before["tls.crt"]
