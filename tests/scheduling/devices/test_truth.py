from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from scheduling.devices.truth import Kind, PodDevices, PodRecord, reconcile


def record(pod: str, annotated: tuple[int, ...] | None, gpus: int, *, live: bool = True) -> PodRecord:
    return PodRecord(pod, f"uid-{pod}", annotated, gpus, live)


@dataclass(frozen=True)
class Case:
    id: str
    truth: list[PodDevices]
    pods: list[PodRecord]
    corrections: list[tuple[str, tuple[int, ...], Kind]] = field(default_factory=list)
    twice: dict[int, tuple[str, ...]] = field(default_factory=dict)


CASES = [
    Case("agrees", [PodDevices("ns/a", (0, 1))], [record("ns/a", (0, 1), 2)]),
    Case(
        "other-gpus",
        [PodDevices("ns/a", (2, 3))],
        [record("ns/a", (0, 1), 2)],
        [("ns/a", (2, 3), Kind.MISMATCH)],
    ),
    Case(
        "not-placed-by-phalanx",
        [PodDevices("other/x", (5,))],
        [record("other/x", None, 1)],
        [("other/x", (5,), Kind.UNANNOTATED)],
    ),
    Case("still-in-admission", [PodDevices("ns/a", (2,), pending=True)], [record("ns/a", (0, 1), 2)]),
    Case("unknown-to-the-api", [PodDevices("ns/gone", (4,))], []),
    Case("finished", [PodDevices("ns/a", (2, 3))], [record("ns/a", (0, 1), 2, live=False)]),
    Case("holds-nothing", [PodDevices("ns/a", ())], [record("ns/a", (0, 1), 2)]),
    Case(
        "held-twice-is-reported-not-corrected",
        [PodDevices("ns/a", (1, 2)), PodDevices("ns/b", (2,))],
        [record("ns/a", (1, 2), 2), record("ns/b", (2,), 1)],
        twice={2: ("ns/a", "ns/b")},
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_reconcile(case: Case) -> None:
    report = reconcile(case.truth, {p.pod: p for p in case.pods})
    assert [(c.pod, c.actual, c.kind) for c in report.corrections] == case.corrections
    assert dict(report.held_twice) == case.twice


def test_a_correction_names_the_pod_by_uid_and_says_what_phalanx_chose() -> None:
    report = reconcile([PodDevices("ns/a", (2, 3))], {"ns/a": record("ns/a", (0, 1), 2)})
    (correction,) = report.corrections
    assert correction.uid == "uid-ns/a"
    assert correction.describe().startswith("phalanx chose GPUs 0,1 but the kubelet gave the containers")


def test_devices_that_are_no_gpu_of_the_node_are_reported() -> None:
    report = reconcile([PodDevices("ns/a", (), unknown=("GPU-x",))], {})
    assert dict(report.unknown) == {"ns/a": ("GPU-x",)}
