"""The shortened prioritize reply leads kube-scheduler only to hosts the full reply could lead it to.

The model of kube-scheduler is ``prioritizeNodes`` and ``nodeScoreHeap`` of ``schedule_one.go`` (v1.36):
each candidate's total is its in-tree plugins' total plus ``score x weight x 10`` per host an extender
listed; the highest total wins, and among equal totals the highest random key, which is drawn for a
host an extender listed and left at 0 for one it did not.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from extender.wire import host_priority_list

MAX_NODE_SCORE, MAX_EXTENDER_PRIORITY = 100, 10


def totals(in_tree: dict[str, int], reply: list[dict[str, object]], weight: int) -> dict[str, int]:
    """Every candidate's total score as kube-scheduler adds it up."""
    out = dict(in_tree)
    for entry in reply:
        host, score = entry["Host"], entry["Score"]
        assert isinstance(host, str) and isinstance(score, int)
        out[host] += score * weight * (MAX_NODE_SCORE // MAX_EXTENDER_PRIORITY)
    return out


def possible_picks(in_tree: dict[str, int], reply: list[dict[str, object]], weight: int) -> set[str]:
    """The hosts kube-scheduler may pick, over all draws of its random keys."""
    total = totals(in_tree, reply, weight)
    best = max(total.values())
    tied = {n for n, t in total.items() if t == best}
    listed = tied & {str(e["Host"]) for e in reply}
    return listed or tied


clusters = st.dictionaries(
    st.text("abcdefgh", min_size=1, max_size=4),
    st.tuples(st.integers(0, 1300), st.integers(0, 10)),
    min_size=1,
    max_size=40,
)


@settings(max_examples=500, deadline=None)
@given(clusters, st.integers(1, 10), st.booleans())
def test_the_short_reply_picks_only_hosts_the_full_reply_could_pick(
    cluster: dict[str, tuple[int, int]], weight: int, coarse: bool
) -> None:
    if coarse:  # few distinct in-tree totals: ties, the case where the random keys matter
        cluster = {n: (t // 500 * 500, s) for n, (t, s) in cluster.items()}
    in_tree = {n: t for n, (t, _) in cluster.items()}
    scores = [(n, s) for n, (_, s) in cluster.items()]
    full = [{"Host": n, "Score": s} for n, s in scores]
    short = host_priority_list(scores)

    old, new = possible_picks(in_tree, full, weight), possible_picks(in_tree, short, weight)
    assert new and new <= old
    if len(old) == 1:
        assert new == old
    shift = min(s for _, s in scores) * weight * 10
    assert totals(in_tree, short, weight) == {n: t - shift for n, t in totals(in_tree, full, weight).items()}


def test_only_hosts_above_the_lowest_are_listed_less_the_lowest_in_order() -> None:
    reply = host_priority_list([("c", 3), ("a", 7), ("b", 3), ("d", 10)])
    assert reply == [{"Host": "a", "Score": 4}, {"Host": "d", "Score": 7}]
    assert host_priority_list([("a", 5), ("b", 5)]) == []
    assert host_priority_list([]) == []


def test_a_tie_at_the_top_goes_to_the_host_phalanx_ranks_higher() -> None:
    # n1 packs better (extender 6 vs 5) but in-tree scoring favours n2 by exactly one extender point.
    in_tree, scores = {"n1": 100, "n2": 150}, [("n1", 6), ("n2", 5)]
    full = [{"Host": n, "Score": s} for n, s in scores]
    assert possible_picks(in_tree, full, 5) == {"n1", "n2"}
    assert possible_picks(in_tree, host_priority_list(scores), 5) == {"n1"}
