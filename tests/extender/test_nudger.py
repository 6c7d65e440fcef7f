"""The nudger wakes turned-down pods when room frees up or a queue rule changes, and only then."""

from __future__ import annotations

import threading
from dataclasses import replace

from extender.nudger import NUDGE_ANNOTATION, Nudger
from tests.builders import a_pod


class Toucher:
    def __init__(self) -> None:
        self.touched: list[tuple[str, str]] = []
        self.done = threading.Event()

    def touch(self, namespace: str, name: str, key: str, value: str) -> None:
        assert key == NUDGE_ANNOTATION
        self.touched.append((namespace, name))
        self.done.set()


def run(nudger: Nudger, toucher: Toucher, wake: object, *, wait: float = 2.0) -> list[tuple[str, str]]:
    stop = threading.Event()
    thread = threading.Thread(target=nudger.run, args=(stop, 0.01))
    thread.start()
    try:
        if callable(wake):
            wake()
        toucher.done.wait(wait)
    finally:
        stop.set()
        thread.join()
    return toucher.touched


def test_a_queue_change_wakes_pods_a_queue_rule_held() -> None:
    toucher = Toucher()
    nudger = Nudger(toucher, clock=lambda: 0.0)
    nudger.turned_down(a_pod("held").gpus(4).build())
    assert run(nudger, toucher, nudger.queues_changed) == [("ml", "held")]


def test_freed_capacity_wakes_them_and_a_bound_pod_is_forgotten() -> None:
    toucher = Toucher()
    nudger = Nudger(toucher, clock=lambda: 0.0)
    waiting, placed = a_pod("waiting").gpus(4).build(), a_pod("placed").gpus(4).build()
    nudger.turned_down(waiting)
    nudger.turned_down(placed)
    nudger.pod_changed(placed, replace(placed, node_name="n0"))
    leaving = a_pod("done").gpus(8).on("n1", range(8)).build()
    assert run(nudger, toucher, lambda: nudger.pod_changed(leaving, None)) == [("ml", "waiting")]


def test_nothing_is_touched_without_a_reason() -> None:
    toucher = Toucher()
    nudger = Nudger(toucher, clock=lambda: 0.0)
    nudger.turned_down(a_pod("held").gpus(4).build())
    assert run(nudger, toucher, None, wait=0.3) == []  # thirty rounds of the loop


def test_a_reserved_gangs_turned_down_members_are_touched_at_once_and_nobody_else() -> None:
    toucher = Toucher()
    nudger = Nudger(toucher, clock=lambda: 0.0)
    early, other = a_pod("w0").gpus(2).group("g").build(), a_pod("stranger").gpus(4).build()
    nudger.turned_down(early)
    nudger.turned_down(other)
    never_parked = a_pod("w1").gpus(2).group("g").build()
    assert run(nudger, toucher, lambda: nudger.reserved([early.uid, never_parked.uid])) == [("ml", "w0")]


def test_a_reserved_gang_whose_members_were_never_turned_down_touches_nothing() -> None:
    toucher = Toucher()
    nudger = Nudger(toucher, clock=lambda: 0.0)
    nudger.turned_down(a_pod("stranger").gpus(4).build())
    assert run(nudger, toucher, lambda: nudger.reserved(["uid-ml-w0"]), wait=0.3) == []


def test_a_new_view_wakes_pods_held_for_groups_no_longer_ahead_of_them() -> None:
    """The demo's stuck pod: held against a view built before it existed, then first in the fair order."""
    toucher = Toucher()
    nudger = Nudger(toucher, clock=lambda: 0.0)
    moved, still = a_pod("moved").gpus(2).build(), a_pod("still").gpus(2).build()
    nudger.held_for_ahead(moved, "ml/moved", ("ml/llm",))
    nudger.held_for_ahead(still, "ml/still", ("ml/big",))
    ahead_now = {"ml/moved": (), "ml/still": ("ml/big",)}

    def rebuilt() -> None:
        nudger.view_rebuilt(lambda group, ahead: not set(ahead) <= set(ahead_now[group]))

    assert run(nudger, toucher, rebuilt) == [("ml", "moved")]
    toucher.done.clear()
    assert run(nudger, toucher, rebuilt, wait=0.3) == [("ml", "moved")], "woken once, then forgotten"


def test_a_gang_member_told_another_rule_than_its_gang_now_is_touched_at_once() -> None:
    """A gang larger than the cluster is never reserved: its first member must not keep "1 of 4"."""
    toucher = Toucher()
    nudger = Nudger(toucher, clock=lambda: 0.0)
    first = a_pod("huge-0").gpus(8).group("huge").build()
    nudger.turned_down(first, "gang ml/huge: waiting for members: 1 of 4 pods exist")
    nudger.turned_down(a_pod("other-0").gpus(8).group("other").build(), "gang ml/other: waiting for members")
    told = "gang ml/huge: needs 32 GPUs for 4 pods (8 per pod); 24 free on 3 nodes"
    assert run(nudger, toucher, lambda: nudger.group_told("ml/huge", told)) == [("ml", "huge-0")]


def test_a_gang_member_told_the_same_rule_with_other_figures_is_left_alone() -> None:
    toucher = Toucher()
    nudger = Nudger(toucher, clock=lambda: 0.0)
    first = a_pod("g-0").gpus(1).group("g").build()
    nudger.turned_down(first, "gang ml/g: waiting for members: 1 of 64 pods exist")
    told = "gang ml/g: waiting for members: 2 of 64 pods exist"
    assert run(nudger, toucher, lambda: nudger.group_told("ml/g", told), wait=0.3) == []


def test_a_parked_member_bound_since_is_forgotten_with_its_gang_index() -> None:
    toucher = Toucher()
    nudger = Nudger(toucher, clock=lambda: 0.0)
    for i in range(3):
        nudger.turned_down(a_pod(f"g-{i}").gpus(1).group("g").build(), "gang ml/g: waiting for members")
    for i in range(3):
        pod = a_pod(f"g-{i}").gpus(1).group("g").build()
        nudger.pod_changed(pod, replace(pod, node_name="n0"))
    assert run(nudger, toucher, lambda: nudger.group_told("ml/g", "gang ml/g: reserved"), wait=0.3) == []
