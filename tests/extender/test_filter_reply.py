"""The filter reply leaves out the turned-down nodes' reasons only when kube-scheduler never reads them.

The model of kube-scheduler is ``findNodesThatPassExtenders`` of ``schedule_one.go`` (v1.36): the
reply's feasible list replaces the candidates, and the failed nodes' reasons become statuses that only
an unschedulable pod's diagnosis (its FitError and preemption) reads, so a reply matters through its
feasible list always, and through its reasons only when that list is empty.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from extender.wire import ExtenderArgs, filter_result
from scheduling import reasons
from scheduling.model import Pod, Resources
from scheduling.reasons import Rejection

REJECTIONS = [
    reasons.too_few_free_gpus(1, 4),
    reasons.gang_waiting("gang ml/g: waiting for members: 2 of 4"),
    reasons.unknown_node(),
    reasons.cordoned(),
]


def what_kube_scheduler_uses(reply: dict[str, Any]) -> tuple[list[str], dict[str, tuple[str, str]] | None]:
    """The feasible names, and the statuses when (and only when) no node is feasible."""
    feasible = (
        reply["NodeNames"]
        if reply["NodeNames"] is not None
        else [n["metadata"]["name"] for n in reply["Nodes"]["items"]]
    )
    if feasible:
        return feasible, None
    statuses = {n: ("Unschedulable", m) for n, m in reply["FailedNodes"].items()}
    statuses |= {
        n: ("UnschedulableAndUnresolvable", m) for n, m in reply["FailedAndUnresolvableNodes"].items()
    }
    return feasible, statuses


def full_reply(args: ExtenderArgs, feasible: list[str], rejected: dict[str, Rejection]) -> dict[str, Any]:
    """The reply as it was before reasons were left out: every turned-down node with its reason."""
    reply = filter_result(args, feasible, rejected)
    reply["FailedNodes"] = {n: r.message for n, r in rejected.items() if r.code is reasons.Code.UNSCHEDULABLE}
    reply["FailedAndUnresolvableNodes"] = {
        n: r.message for n, r in rejected.items() if r.code is reasons.Code.UNRESOLVABLE
    }
    return reply


def _args(names: list[str], full_nodes: bool) -> ExtenderArgs:
    pod = Pod(name="p", namespace="ml", uid="u", requests=Resources(gpus=1))
    nodes = {n: {"metadata": {"name": n}} for n in names} if full_nodes else None
    return ExtenderArgs(pod, tuple(names), nodes)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 4)), min_size=0, max_size=30).map(lambda xs: [x for (x,) in xs]),
    st.booleans(),
)
def test_kube_scheduler_sees_the_same_result_as_with_every_reason(
    verdicts: list[int], full_nodes: bool
) -> None:
    names = [f"n{i:02d}" for i in range(len(verdicts))]
    feasible = [n for n, v in zip(names, verdicts, strict=True) if v == 4]
    rejected = {n: REJECTIONS[v] for n, v in zip(names, verdicts, strict=True) if v < 4}
    args = _args(names, full_nodes)
    assert what_kube_scheduler_uses(filter_result(args, feasible, rejected)) == what_kube_scheduler_uses(
        full_reply(args, feasible, rejected)
    )


def test_a_reserved_gang_member_gets_its_node_and_no_4999_sentences() -> None:
    names = [f"n{i:04d}" for i in range(5000)]
    rejected = {n: reasons.reserved("gang ml/g's reservation") for n in names if n != "n0042"}
    reply = filter_result(_args(names, False), ["n0042"], rejected)
    assert reply["NodeNames"] == ["n0042"]
    assert reply["FailedNodes"] == reply["FailedAndUnresolvableNodes"] == {}


def test_when_no_node_passes_every_node_keeps_its_reason() -> None:
    rejected = {"a": reasons.too_few_free_gpus(1, 4), "b": reasons.unknown_node()}
    reply = filter_result(_args(["a", "b"], False), [], rejected)
    assert reply["NodeNames"] == []
    assert reply["FailedNodes"] == {"a": rejected["a"].message}
    assert reply["FailedAndUnresolvableNodes"] == {"b": rejected["b"].message}
