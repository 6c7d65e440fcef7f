"""A bounded, thread-safe least-recently-used map: the storage behind :class:`TopologyCache`.

The core keeps no module-level state; callers own their caches and decide how big they may grow. A
lock makes one cache safe to share between the extender's request threads (it guards only dictionary
updates, never a computation).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class BoundedCache(Generic[K, V]):
    """A map that forgets its least recently used entry once it holds ``maxsize`` entries.

    >>> cache: BoundedCache[str, int] = BoundedCache(2)
    >>> cache.put("a", 1); cache.put("b", 2); cache.get("a"); cache.put("c", 3)
    1
    >>> cache.get("b") is None, len(cache), cache.hits, cache.misses
    (True, 2, 1, 1)
    """

    def __init__(self, maxsize: int) -> None:
        if maxsize < 1:
            msg = f"a cache needs room for at least one entry, got maxsize={maxsize}"
            raise ValueError(msg)
        self._maxsize = maxsize
        self._entries: OrderedDict[K, V] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def get(self, key: K) -> V | None:
        """The value stored under ``key`` (now the most recently used), or ``None``."""
        with self._lock:
            value = self._entries.get(key)
            if value is None:
                self.misses += 1
                return None
            self._entries.move_to_end(key)
            self.hits += 1
            return value

    def put(self, key: K, value: V) -> None:
        """Store ``value`` under ``key``, evicting the least recently used entry when full."""
        with self._lock:
            self._entries[key] = value
            self._entries.move_to_end(key)
            while len(self._entries) > self._maxsize:
                self._entries.popitem(last=False)

    def clear(self) -> None:
        """Forget every entry (the hit and miss counts stay)."""
        with self._lock:
            self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)
