from __future__ import annotations

from scheduling.cluster.promises import Promise, PromiseBook


def test_promises_index_by_node_and_expire_by_time() -> None:
    book = (
        PromiseBook()
        .add(Promise("u1", "ml/a", "n1", (0, 1), 10.0))
        .add(Promise("u2", "ml/b", "n1", (2,), 20.0))
    )
    assert book.on_node("n1") == frozenset({0, 1, 2})
    later, lapsed = book.expire(15.0)
    assert [p.pod_uid for p in lapsed] == ["u1"]
    assert later.on_node("n1") == frozenset({2})
    assert book.on_node("n1") == frozenset({0, 1, 2}), "the old book is an unchanged value"


def test_release_and_replace() -> None:
    book = PromiseBook().add(Promise("u1", "ml/a", "n1", (0,), 10.0))
    moved = book.add(Promise("u1", "ml/a", "n2", (3,), 10.0))
    assert moved.on_node("n1") == frozenset()
    assert moved.on_node("n2") == frozenset({3})
    assert moved.release("u1").by_uid == {}
    assert moved.release("nobody") is moved
