"""Which of an MPIJob's pods carries its progress report, by the MPI Operator's labels."""

from __future__ import annotations

from dataclasses import replace
from types import MappingProxyType

import pytest

from kubeio.mpijob_pods import INDEX_LABEL, JOB_NAME_LABEL, ROLE_LABEL, report_on_pods
from scheduling.model import Pod
from tests.builders import a_pod


def job_pod(
    name: str, progress: str | None, *, job: str = "mnist", role: str = "worker", index: int = 0
) -> Pod:
    labels = {JOB_NAME_LABEL: job, ROLE_LABEL: role, INDEX_LABEL: str(index)}
    return replace(a_pod(name).build(), labels=MappingProxyType(labels), progress=progress)


@pytest.mark.parametrize(
    ("pods", "found"),
    [
        pytest.param([], None, id="no-pods"),
        pytest.param([job_pod("mnist-worker-0", None)], None, id="no-report"),
        pytest.param([job_pod("mnist-worker-0", "w0")], ("w0", "ml/mnist-worker-0"), id="rank-0-in-worker-0"),
        pytest.param(
            [job_pod("mnist-worker-0", "w0"), job_pod("mnist-launcher", "l", role="launcher")],
            ("l", "ml/mnist-launcher"),
            id="the-launcher-first",
        ),
        pytest.param(
            [job_pod("mnist-worker-3", "w3", index=3), job_pod("mnist-worker-1", "w1", index=1)],
            ("w1", "ml/mnist-worker-1"),
            id="then-the-lowest-index",
        ),
        pytest.param(
            [replace(job_pod("mnist-launcher", "l", role="launcher"), terminating=True), job_pod("w", "w0")],
            ("w0", "ml/w"),
            id="not-a-pod-being-deleted",
        ),
        pytest.param(
            [job_pod("other-launcher", "o", job="other", role="launcher"), job_pod("mnist-worker-0", "w0")],
            ("w0", "ml/mnist-worker-0"),
            id="not-another-jobs",
        ),
        pytest.param(
            [replace(job_pod("mnist-launcher", "x", role="launcher"), namespace="other")],
            None,
            id="not-another-namespaces",
        ),
    ],
)
def test_the_report_of_a_job_is_read_from_one_of_its_pods_by_one_rule(
    pods: list[Pod], found: tuple[str, str] | None
) -> None:
    assert report_on_pods("ml", "mnist", pods) == found
    assert report_on_pods("ml", "mnist", list(reversed(pods))) == found, (
        "the order of the list decides nothing"
    )
