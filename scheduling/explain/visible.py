"""An explanation as a member of one namespace may see it: other namespaces' workloads are not named.

An answer names other groups in a few places: the groups ahead in the fair order and those it is held
for (``queue.ahead``, ``queue.holders``), the running groups whose finishing makes room
(``what_if.finished``), and the sentences that quote them. A user allowed to read only their own
namespace gets the same answer (cause, verdict, figures, nodes, plan) with each such name of another
namespace replaced by ``OTHER``, so how many groups are ahead, and why, stays true while whose they are
stays private.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from scheduling.explain.explanation import Explanation

OTHER = "(a group of another namespace)"
"""What stands in for a group of another namespace."""


def foreign_keys(said: Explanation, namespace: str) -> frozenset[str]:
    """The ``namespace/name`` keys the explanation names that are not of ``namespace``."""
    named: list[str] = []
    if said.queue is not None:
        named += [*said.queue.ahead, *said.queue.holders]
    if said.what_if is not None:
        named += said.what_if.finished
    return frozenset(key for key in named if key.partition("/")[0] != namespace)


def _hide(text: str, keys: Iterable[str]) -> str:
    for key in sorted(keys, key=lambda k: (-len(k), k)):  # longest first: "a/b-1" before "a/b"
        text = text.replace(key, OTHER)
    return text


def for_namespace(said: Explanation, namespace: str) -> Explanation:
    """``said`` with every group of a namespace other than ``namespace`` replaced by ``OTHER``.

    >>> from scheduling.explain.explanation import Cause, WhatIf
    >>> what_if = WhatIf(("b/x", "a/y"), 8, ())
    >>> said = Explanation("pod", "a/p", Cause.HELD_FOR_AHEAD, "waits for b/x", what_if=what_if)
    >>> hidden = for_namespace(said, "a")
    >>> hidden.verdict, hidden.what_if.finished
    ('waits for (a group of another namespace)', ('(a group of another namespace)', 'a/y'))
    """
    keys = foreign_keys(said, namespace)
    if not keys:
        return said

    def names(values: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(OTHER if v in keys else _hide(v, keys) for v in values)

    queue = said.queue
    if queue is not None:
        queue = dataclasses.replace(
            queue,
            ahead=names(queue.ahead),
            holders=names(queue.holders),
            sentence=_hide(queue.sentence, keys),
            problems=names(queue.problems),
        )
    what_if = said.what_if
    if what_if is not None:
        what_if = dataclasses.replace(what_if, finished=names(what_if.finished))
    nodes = tuple(dataclasses.replace(g, message=_hide(g.message, keys)) for g in said.nodes)
    return dataclasses.replace(
        said,
        verdict=_hide(said.verdict, keys),
        filter_message=None if said.filter_message is None else _hide(said.filter_message, keys),
        admission=None if said.admission is None else _hide(said.admission, keys),
        queue=queue,
        what_if=what_if,
        nodes=nodes,
    )
