"""The extender's one piece of mutable decision state: the promise book, swapped under a lock.

Readers (filter, prioritize) take ``book`` without locking: it is an immutable value. Writers pass a
function from the old book to the new one and a result, applied under the lock, so two writers never
lose each other's promises.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TypeVar

from scheduling.cluster.promises import PromiseBook

T = TypeVar("T")


class PromiseLedger:
    """Holds the current ``PromiseBook``."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._book = PromiseBook()

    @property
    def book(self) -> PromiseBook:
        """The current book (an immutable value)."""
        return self._book

    def update(self, change: Callable[[PromiseBook], tuple[PromiseBook, T]]) -> T:
        """Apply ``change`` to the book atomically and return its result."""
        with self._lock:
            self._book, result = change(self._book)
            return result

    def release(self, uid: str) -> None:
        """Drop the promise to pod ``uid``, if any."""
        if uid in self._book.by_uid:
            self.update(lambda book: (book.release(uid), None))

    def renew_group(self, group: str, until: float) -> None:
        """Make every promise to members of ``group`` last at least ``until``."""
        if group in self._book.by_group:
            self.update(lambda book: (book.renew_group(group, until), None))

    def release_group(self, group: str) -> None:
        """Drop every promise to members of ``group``."""
        if group in self._book.by_group:
            self.update(lambda book: (book.release_group(group), None))
