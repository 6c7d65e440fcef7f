from __future__ import annotations

from dataclasses import replace

from extender.ledger import PromiseLedger
from extender.nominator import Nominator
from kubeio.errors import KubeError
from scheduling.cluster.promises import Promise
from tests.builders import FakeCluster, FakeNominator, a_node, members


def bed(count: int = 3) -> tuple[FakeCluster, PromiseLedger, FakeNominator, Nominator]:
    cluster = FakeCluster().add(a_node("n1").build(), a_node("n2").build())
    cluster.add(*members("g", count, 1))
    ledger = PromiseLedger()
    writer = FakeNominator(cluster)
    return cluster, ledger, writer, Nominator(writer, lambda: ledger.book, cluster.snapshot)


def reserve(cluster: FakeCluster, ledger: PromiseLedger, node: str) -> None:
    promises = [
        Promise(p.uid, p.key, node, (i,), 60.0, p.requests, "ml/g")
        for i, p in enumerate(sorted(cluster.pods.values(), key=lambda p: p.name))
    ]
    ledger.update(lambda book: (book.add_all(promises), None))


def test_each_reserved_member_is_nominated_once_then_cleared_when_the_reservation_ends() -> None:
    cluster, ledger, writer, nominator = bed()
    reserve(cluster, ledger, "n1")
    assert nominator.reconcile() == 3
    assert sorted((key, node) for key, _, node in writer.calls) == [
        ("ml/w0", "n1"),
        ("ml/w1", "n1"),
        ("ml/w2", "n1"),
    ]
    assert nominator.reconcile() == 0, "nothing changed: nothing written again"
    bound = cluster.pods["ml/w0"]
    cluster.pods["ml/w0"] = replace(bound, node_name="n1")
    ledger.release_group("ml/g")
    writer.calls.clear()
    assert nominator.reconcile() == 2
    assert sorted((key, node) for key, _, node in writer.calls) == [("ml/w1", None), ("ml/w2", None)]


def test_a_failed_write_is_tried_again_at_the_next_reconcile() -> None:
    cluster, ledger, writer, nominator = bed(1)
    reserve(cluster, ledger, "n2")
    writer.fail_with = KubeError(500, "InternalError", "etcd is slow")
    assert nominator.reconcile() == 0
    writer.fail_with = None
    assert nominator.reconcile() == 1
    assert writer.calls == [("ml/w0", cluster.pods["ml/w0"].uid, "n2")]


def test_a_pod_the_api_server_no_longer_has_is_not_written_and_not_retried_once_the_cache_agrees() -> None:
    cluster, ledger, _, _ = bed(2)
    reserve(cluster, ledger, "n1")
    api = FakeCluster(dict(cluster.nodes), {k: p for k, p in cluster.pods.items() if k != "ml/w1"})
    writer = FakeNominator(api)  # the cache (``cluster``) still has w1; the API server does not
    nominator = Nominator(writer, lambda: ledger.book, cluster.snapshot)
    assert nominator.reconcile() == 1
    assert [key for key, _, _ in writer.calls] == ["ml/w0"]
    del cluster.pods["ml/w1"]  # the cache sees the deletion
    ledger.release(next(u for u, p in ledger.book.by_uid.items() if p.pod_key == "ml/w1"))
    assert nominator.reconcile() == 0
