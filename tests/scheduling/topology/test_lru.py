from __future__ import annotations

import pytest

from scheduling.topology.lru import BoundedCache


def test_evicts_least_recently_used() -> None:
    cache: BoundedCache[int, str] = BoundedCache(2)
    cache.put(1, "a")
    cache.put(2, "b")
    assert cache.get(1) == "a"
    cache.put(3, "c")
    assert cache.get(2) is None
    assert (cache.get(1), cache.get(3), len(cache)) == ("a", "c", 2)
    assert (cache.hits, cache.misses) == (3, 1)
    cache.clear()
    assert len(cache) == 0


def test_needs_room() -> None:
    with pytest.raises(ValueError, match="at least one entry"):
        BoundedCache(0)
