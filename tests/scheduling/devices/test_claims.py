from __future__ import annotations

from dataclasses import dataclass

import pytest

from scheduling.devices.claims import AllocationAsk, Basis, DeviceClaim, best_available, contenders, prefer
from scheduling.topology import parse_topo_matrix, prepare_topology
from tests.conftest import REPO

ALL = frozenset(range(8))


def ask(size: int, available: frozenset[int] = ALL, must: frozenset[int] = frozenset()) -> AllocationAsk:
    return AllocationAsk(available, must, size)


def claim(
    pod: str, gpus: tuple[int, ...], sizes: tuple[int, ...] | None = None, order: int = 0
) -> DeviceClaim:
    return DeviceClaim(pod, gpus, sizes if sizes is not None else (len(gpus),), order)


def lowest(request: AllocationAsk) -> tuple[int, ...]:
    return tuple(sorted(request.available)[: request.size])


@dataclass(frozen=True)
class Case:
    id: str
    ask: AllocationAsk
    claims: list[DeviceClaim]
    admitting: frozenset[str] | None
    gpus: tuple[int, ...]
    basis: Basis
    pod: str | None


CASES = [
    Case("one-pod-its-set", ask(2), [claim("ns/a", (4, 5))], None, (4, 5), Basis.PLACED, "ns/a"),
    Case(
        "other-size-is-no-contender",
        ask(2),
        [claim("ns/a", (4, 5)), claim("ns/b", (0,), order=1)],
        None,
        (4, 5),
        Basis.PLACED,
        "ns/a",
    ),
    Case(
        "a-set-already-taken-is-no-contender",
        ask(2, frozenset({0, 1, 2, 3})),
        [claim("ns/a", (4, 5)), claim("ns/b", (2, 3), order=1)],
        None,
        (2, 3),
        Basis.PLACED,
        "ns/b",
    ),
    Case(
        "two-contenders-unasked-is-a-guess-at-the-earliest",
        ask(2),
        [claim("ns/b", (2, 3), order=1), claim("ns/a", (4, 5), order=0)],
        None,
        (4, 5),
        Basis.GUESSED,
        "ns/a",
    ),
    Case(
        "the-kubelet-names-the-later-one",
        ask(2),
        [claim("ns/a", (4, 5), order=0), claim("ns/b", (2, 3), order=1)],
        frozenset({"ns/b"}),
        (2, 3),
        Basis.KUBELET,
        "ns/b",
    ),
    Case(
        "the-kubelet-names-no-contender-but-another-pod",
        ask(2),
        [claim("ns/a", (4, 5)), claim("ns/b", (2, 3), order=1)],
        frozenset({"other/x"}),
        (0, 1),
        Basis.UNCLAIMED,
        None,
    ),
    Case(
        "the-kubelet-names-nobody",
        ask(2),
        [claim("ns/a", (4, 5)), claim("ns/b", (2, 3), order=1)],
        frozenset(),
        (4, 5),
        Basis.GUESSED,
        "ns/a",
    ),
    Case("no-phalanx-pod", ask(2, frozenset({3, 6, 7})), [], None, (3, 6), Basis.UNCLAIMED, None),
    Case(
        "a-pod-phalanx-did-not-place",
        ask(1, frozenset({3, 6})),
        [claim("other/x", (), sizes=(1,))],
        None,
        (3,),
        Basis.UNCLAIMED,
        "other/x",
    ),
    Case(
        "the-kubelet-names-the-pod-phalanx-did-not-place",
        ask(1),
        [claim("ns/a", (5,)), claim("other/x", (), sizes=(1,), order=1)],
        frozenset({"other/x"}),
        (0,),
        Basis.KUBELET,
        "other/x",
    ),
    Case(
        "must-include-narrows-the-contenders",
        ask(2, frozenset({5, 6, 7}), must=frozenset({4})),
        [claim("ns/a", (4, 5)), claim("ns/b", (6, 7), order=1)],
        None,
        (4, 5),
        Basis.PLACED,
        "ns/a",
    ),
    Case(
        "second-container-takes-the-rest-of-the-pod-set",
        ask(2, frozenset({2, 3, 6, 7})),
        [claim("ns/a", (0, 1, 2, 3), sizes=(2, 2))],
        None,
        (2, 3),
        Basis.PLACED,
        "ns/a",
    ),
    Case("size-zero-has-no-contender", ask(0), [claim("ns/a", (1,))], None, (), Basis.UNCLAIMED, None),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_prefer(case: Case) -> None:
    preference = prefer(case.ask, case.claims, admitting=case.admitting, fallback=lowest)
    assert (preference.gpus, preference.basis, preference.pod) == (case.gpus, case.basis, case.pod)


def test_contenders_come_in_bind_order_then_by_name() -> None:
    claims = [claim("ns/c", (0,), order=2), claim("ns/b", (1,), order=1), claim("ns/a", (2,), order=1)]
    assert [c.pod for c in contenders(ask(1), claims)] == ["ns/a", "ns/b", "ns/c"]


def test_the_fallback_is_asked_only_for_a_pod_phalanx_did_not_place() -> None:
    def refuse(_: AllocationAsk) -> tuple[int, ...]:
        msg = "the topology choice was computed for a phalanx pod"
        raise AssertionError(msg)

    assert prefer(ask(1), [claim("ns/a", (3,))], admitting=None, fallback=refuse).gpus == (3,)


CUBE_MESH = REPO / "hack" / "topologies" / "v100-sxm2-8gpu-cubemesh_oneflow-dlperf-4x8v100.txt"


def test_best_available_takes_an_nvlink_pair_where_the_lowest_indices_are_not_one() -> None:
    topology = prepare_topology(parse_topo_matrix(CUBE_MESH.read_text(), gpu_model="Tesla V100-SXM2-16GB"))
    free = frozenset({0, 1, 5, 6, 7})
    pair = best_available(ask(2, free), topology)
    link = topology.document.link(*pair)
    assert pair != (0, 1)
    assert link is not None
    assert link.nvlinks > 0


def test_best_available_completes_a_must_include_with_the_lowest() -> None:
    assert best_available(ask(3, frozenset({1, 4, 7}), must=frozenset({6})), None) == (1, 4, 6)
