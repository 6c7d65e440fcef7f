"""A sorted order of keys, one per name, changed one name at a time: the incremental rankings' shared step.

``scheduling.nodes.rank_index`` (the decisive node per pod shape, across snapshots) and
``scheduling.gang.fresh_order`` (the gang planner's unused nodes, across plans on one statement) each
keep every node's key in a sorted list and, when a node changes, replace its key in place rather than
sort again; this is that replacement, written once.
"""

from __future__ import annotations

import bisect
from typing import Any, TypeVar

K = TypeVar("K", bound=tuple[Any, ...])
"""A key: a tuple that ends with what makes it unique (the name), so equal keys never meet."""


def place(keys: dict[str, K], order: list[K], name: str, key: K | None) -> None:
    """Give ``name`` the key ``key`` in ``order`` (``None``: take it out), keeping ``order`` sorted.

    ``keys`` holds each name's current key; keys are unique (they end with the name), so the old one is
    found by bisection.
    """
    old = keys.pop(name, None)
    if old is not None:
        del order[bisect.bisect_left(order, old)]
    if key is not None:
        keys[name] = key
        bisect.insort(order, key)
