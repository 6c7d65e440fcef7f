"""Plan seals: the placement manager's side of what the framework sidecar's plugin checks."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from kubeio.convert import pod_from_api
from kubeio.plan_seal import SEAL_ANNOTATION, PlanKeyError, PlanSeal, read_key
from scheduling.model import PLAN_ANNOTATION
from tests.conftest import REPO

SEALS = REPO / "sidecar" / "plan" / "testdata" / "seals.json"
"""Seals the Go plugin's tests accept (``sidecar/plan/seal_test.go``): both sides read this file."""


def test_the_seals_the_plugin_accepts_are_the_ones_made_here() -> None:
    fixture = orjson.loads(SEALS.read_bytes())
    seal = PlanSeal(fixture["key"].encode())
    for case in fixture["cases"]:
        at = int(case["seal"].partition(".")[0])
        assert seal.seal(case["pod"], case["plan"], at + 0.75) == case["seal"], case


def test_a_seal_changes_with_each_thing_it_covers() -> None:
    seal = PlanSeal(b"k" * 32)
    made = seal.seal("ns/p", "n1:0,1", 100)
    others = {
        seal.seal("ns/q", "n1:0,1", 100),
        seal.seal("other/p", "n1:0,1", 100),
        seal.seal("ns/p", "n1:0,2", 100),
        seal.seal("ns/p", "n1:0,1", 101),
        PlanSeal(b"j" * 32).seal("ns/p", "n1:0,1", 100),
    }
    assert made not in others and len(others) == 5


def test_annotations_carry_the_plan_and_its_seal() -> None:
    seal = PlanSeal(b"k" * 32)
    written = seal.annotations("ns/p", "n1", (3, 1), 100.0)
    assert written == {PLAN_ANNOTATION: "n1:1,3", SEAL_ANNOTATION: seal.seal("ns/p", "n1:1,3", 100)}


def test_read_key_drops_surrounding_whitespace_as_the_plugin_does(tmp_path: Path) -> None:
    path = tmp_path / "key"
    path.write_bytes(b"  " + b"x" * 40 + b"\n")
    assert read_key(str(path)) == PlanSeal(b"x" * 40)


@pytest.mark.parametrize(
    ("content", "message"),
    [(None, "cannot be read"), (b"short\n", "holds 5 bytes; at least 32 are needed")],
    ids=["missing", "short"],
)
def test_a_key_that_cannot_seal_is_refused_with_the_reason(
    tmp_path: Path, content: bytes | None, message: str
) -> None:
    path = tmp_path / "key"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(PlanKeyError, match=message):
        read_key(str(path))


def test_sealed_at_believes_only_a_plan_this_key_sealed_for_this_pod_and_says_when() -> None:
    seal = PlanSeal(b"k" * 32)
    written = seal.annotations("ns/p", "n1", (0, 1), 100.0)
    assert seal.sealed_at("ns/p", written) == 100.0
    not_ours = {
        "no seal": {PLAN_ANNOTATION: "n1:0,1"},
        "no plan": {SEAL_ANNOTATION: written[SEAL_ANNOTATION]},
        "another plan": {**written, PLAN_ANNOTATION: "n1:0,2"},
        "another key": PlanSeal(b"j" * 32).annotations("ns/p", "n1", (0, 1), 100.0),
        "a time not written as made": {**written, SEAL_ANNOTATION: "0" + written[SEAL_ANNOTATION]},
        "no time": {**written, SEAL_ANNOTATION: "x." + written[SEAL_ANNOTATION].partition(".")[2]},
    }
    for about, written_by_others in not_ours.items():
        assert seal.sealed_at("ns/p", written_by_others) is None, about
    assert seal.sealed_at("ns/q", written) is None, "another pod's plan, copied"


def test_a_cache_that_checks_plans_forgets_a_plan_phalanx_did_not_seal() -> None:
    """The release pass then plans the pod itself instead of keeping the GPUs its author named."""
    seal = PlanSeal(b"k" * 32)
    ours = seal.annotations("ns/ours", "n1", (0, 1), 100.0)
    forged = {PLAN_ANNOTATION: "n1:6,7", SEAL_ANNOTATION: ours[SEAL_ANNOTATION]}
    read = {
        name: pod_from_api(raw_pod(name, annotations), plan_check=seal.sealed_at)
        for name, annotations in (("ours", ours), ("forged", forged))
    }
    assert (read["ours"].plan, read["ours"].planned_at) == (("n1", (0, 1)), 100.0)
    assert (read["forged"].plan, read["forged"].planned_at) == (None, None)
    assert pod_from_api(raw_pod("forged", forged)).plan == ("n1", (6, 7)), "no check: every plan is read"


def raw_pod(
    name: str, annotations: dict[str, str], conditions: list[object] | None = None
) -> dict[str, object]:
    return {
        "metadata": {"uid": f"u-{name}", "namespace": "ns", "name": name, "annotations": annotations},
        "spec": {"schedulerName": "phalanx", "containers": []},
        "status": {"conditions": conditions or []},
    }


OLD, NEW = b"o" * 32, b"n" * 40


def test_a_key_file_of_several_lines_seals_with_the_first_and_believes_them_all(tmp_path: Path) -> None:
    """A rotation under way: plans sealed under the old key stay believed, new ones use the new key."""
    path = tmp_path / "key"
    path.write_bytes(b"\n " + NEW + b"\n\n" + OLD + b"\n")
    seal = read_key(str(path))
    assert seal == PlanSeal(NEW, (OLD,))
    written = seal.annotations("ns/p", "n1", (0,), 100.0)
    assert written == PlanSeal(NEW).annotations("ns/p", "n1", (0,), 100.0), "sealed with the first line"
    by_old = PlanSeal(OLD).annotations("ns/p", "n1", (0,), 90.0)
    assert seal.sealed_at("ns/p", by_old) == 90.0
    assert PlanSeal(NEW).sealed_at("ns/p", by_old) is None, "once the old line is gone, its plans are not"


@pytest.mark.parametrize(
    ("content", "message"),
    [(b"\n \n", "holds no key"), (NEW + b"\nshort\n", "holds 5 bytes on its line 2; at least 32")],
    ids=["blank", "a short second key"],
)
def test_a_key_file_that_cannot_rotate_is_refused_with_the_reason(
    tmp_path: Path, content: bytes, message: str
) -> None:
    path = tmp_path / "key"
    path.write_bytes(content)
    with pytest.raises(PlanKeyError, match=message):
        read_key(str(path))
