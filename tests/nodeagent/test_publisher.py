from __future__ import annotations

from dataclasses import dataclass

import pytest

from kubeio.errors import NotFoundError, UnavailableError
from nodeagent.publisher import PublishOutcome, TopologyPublisher
from scheduling.model import TOPOLOGY_ANNOTATION
from scheduling.topology import uniform

from .fakes import MemoryStore
from .imported import document

NODE = "gpu-node-1"
DOC = document("a6000-8")


@dataclass(frozen=True)
class Case:
    id: str
    before: str | None
    outcome: PublishOutcome


CASES = [
    Case("first-publish", None, PublishOutcome.PATCHED),
    Case("same-json", DOC.to_json(), PublishOutcome.UNCHANGED),
    Case("other-topology", uniform(8, "SYS").to_json(), PublishOutcome.PATCHED),
    Case("hand-edited", DOC.to_json() + " ", PublishOutcome.PATCHED),
    Case("garbage", "not json", PublishOutcome.PATCHED),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_patches_only_when_the_json_differs(case: Case) -> None:
    store = MemoryStore()
    if case.before is not None:
        store.annotations[(NODE, TOPOLOGY_ANNOTATION)] = case.before
    assert TopologyPublisher(store, NODE).publish(DOC) is case.outcome
    assert store.annotations[(NODE, TOPOLOGY_ANNOTATION)] == DOC.to_json()
    expected = [(NODE, TOPOLOGY_ANNOTATION, DOC.to_json())] if case.outcome is PublishOutcome.PATCHED else []
    assert store.patches == expected


def test_publishing_the_same_document_twice_patches_once() -> None:
    store = MemoryStore()
    publisher = TopologyPublisher(store, NODE)
    outcomes = [publisher.publish(DOC) for _ in range(3)]
    assert outcomes == [PublishOutcome.PATCHED, PublishOutcome.UNCHANGED, PublishOutcome.UNCHANGED]
    assert len(store.patches) == 1


def test_other_annotations_are_left_alone() -> None:
    store = MemoryStore(annotations={(NODE, "example.com/other"): "kept"})
    TopologyPublisher(store, NODE).publish(DOC)
    assert store.annotations[(NODE, "example.com/other")] == "kept"


@pytest.mark.parametrize(
    ("node", "failures", "error"),
    [
        ("gpu-node-9", [], NotFoundError),
        (NODE, [UnavailableError(503, "ServiceUnavailable", "apiserver restarting")], UnavailableError),
    ],
    ids=["node-missing", "api-down"],
)
def test_api_errors_reach_the_caller(node: str, failures: list[Exception], error: type[Exception]) -> None:
    store = MemoryStore(failures=failures)
    with pytest.raises(error):
        TopologyPublisher(store, node).publish(DOC)
    assert store.patches == []
