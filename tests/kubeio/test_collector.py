"""The collector policy: survivors frozen after each pass, cyclic garbage freed by a due full collection."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from kubeio.collector import Collector


class Cycle:
    """An object in a reference cycle: only the cyclic collector frees it."""

    def __init__(self) -> None:
        self.me = self


@pytest.fixture
def quiet_collector() -> Iterator[None]:
    """The collector's own thresholds off, and nothing left frozen for the tests after this one."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.unfreeze()
        if was:
            gc.enable()


@pytest.mark.usefixtures("quiet_collector")
def test_a_pass_freezes_its_survivors_and_a_due_full_collection_frees_frozen_cycles() -> None:
    now = [0.0]
    collector = Collector(lambda: now[0], full_every=300.0)
    garbage = Cycle()
    alive = weakref.ref(garbage)
    del garbage
    collector.settle()  # no full collection due: the cycle is frozen with every survivor
    assert gc.get_freeze_count() > 0 and collector.full_collections == 0
    gc.collect()
    assert alive() is not None, "a collection skips what is frozen"
    now[0] = 299.0
    collector.settle()
    assert collector.full_collections == 0, "not due yet"
    now[0] = 300.0
    collector.settle()
    assert collector.full_collections == 1
    assert alive() is None, "the full collection walked the frozen objects too"
    assert gc.get_freeze_count() > 0, "and froze the survivors again"
