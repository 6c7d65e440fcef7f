"""The per-pod budget's analysis on small fixtures: pprof traces, py-spy stacks, Prometheus scrapes."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest
from perf.budget_report import budget_figures, render_budget
from perf.budget_split import (
    api_requests,
    go_split,
    go_traces,
    histogram_deltas,
    metric_sums,
    placement_split,
    python_split,
)

FIXTURES = Path(__file__).parent / "fixtures"

SEP = "-----------+-------------------------------------------------------"

TRACES = f"""File: kube-scheduler
Type: cpu
Duration: 20s, Total samples = 1s ( 5%)
{SEP}
      30ms   encoding/json.(*encodeState).string
             encoding/json.Marshal
             k8s.io/kubernetes/pkg/scheduler.(*HTTPExtender).send
             k8s.io/kubernetes/pkg/scheduler.(*HTTPExtender).Filter
{SEP}
    pprof:  some label
      20ms   encoding/json.(*decodeState).object
             encoding/json.(*Decoder).Decode
             k8s.io/kubernetes/pkg/scheduler.(*HTTPExtender).send
{SEP}
      40ms   k8s.io/kubernetes/pkg/scheduler/framework/plugins/noderesources.(*Fit).Filter
             k8s.io/kubernetes/pkg/scheduler/framework/runtime.(*frameworkImpl).RunFilterPlugins
{SEP}
      10ms   runtime.futex
{SEP}
"""


def test_go_traces_reads_values_and_stacks_after_labels() -> None:
    traces = go_traces(TRACES)
    assert [round(s, 3) for s, _ in traces] == [0.03, 0.02, 0.04, 0.01]
    assert traces[1][1][0] == "encoding/json.(*decodeState).object"


def test_go_split_scales_shares_to_the_process_cpu() -> None:
    split = go_split(TRACES, cpu_ms_per_pod=10.0)
    parts = split["parts_ms_per_pod"]
    assert parts == {
        "in-tree filter plugins": 4.0,
        "extender client: JSON encode": 3.0,
        "extender client: JSON decode": 2.0,
        "other (runtime, syscalls, timers)": 1.0,
    }
    assert split["profile_cpu_seconds"] == pytest.approx(0.1)


RAW = "\n".join(
    [
        "thread (1): ThreadPoolExecutor-0_3;handle (extender/worker.py:50);"
        "filter_ (extender/routes.py:74);decode (extender/wire.py:60) 4",
        "thread (1): ThreadPoolExecutor-0_3;handle (extender/worker.py:50);"
        "filter_ (extender/routes.py:74);filter (extender/service.py:120);"
        "filter_nodes (scheduling/gpu/fit.py:60) 10",
        "thread (1): ThreadPoolExecutor-0_3;handle (extender/worker.py:50);"
        "prioritize (extender/routes.py:90);pod_from_api (kubeio/convert.py:10);"
        "parse (scheduling/quantity.py:5) 2",
        "thread (1): ThreadPoolExecutor-0_3;handle (extender/worker.py:50);environ (extender/worker.py:70) 1",
        "thread (2): watch-pods;run (kubeio/reflector.py:50) 3",
        "thread (3): queues;refresh (extender/view_keeper.py:90) 5",
    ]
)


def test_python_split_by_verb_part_and_thread() -> None:
    split = python_split(RAW, ms_per_sample_per_pod=0.1)
    parts = split["parts_ms_per_pod"]
    assert parts["filter: the core's decision (scheduling/)"] == pytest.approx(1.0)
    assert parts["filter: read and decode the body"] == pytest.approx(0.4)
    assert parts["prioritize: parse the pod (kubeio.convert)"] == pytest.approx(0.2)
    assert parts["request, before routing: WSGI environ and reply (extender/worker.py)"] == pytest.approx(0.1)
    assert parts["cache: pod watch events (decode, convert, apply, listeners)"] == pytest.approx(0.3)
    assert parts["queue view rebuild (every second)"] == pytest.approx(0.5)
    assert split["samples"] == 25
    assert split["groups_ms_per_pod"]["filter"] == pytest.approx(1.4)


def _scrape(algorithm: float, filter_: float, count: int) -> str:
    algo = "scheduler_scheduling_algorithm_duration_seconds"
    point = "scheduler_framework_extension_point_duration_seconds"
    labels = 'extension_point="Filter",profile="p",status="Success"'
    return "\n".join(
        [
            f"# HELP {algo} x",
            f"# TYPE {algo} histogram",
            f'{algo}_bucket{{le="+Inf"}} {count}',
            f"{algo}_sum {algorithm}",
            f"{algo}_count {count}",
            f"# HELP {point} x",
            f"# TYPE {point} histogram",
            f'{point}_bucket{{{labels},le="+Inf"}} {count}',
            f"{point}_sum{{{labels}}} {filter_}",
            f"{point}_count{{{labels}}} {count}",
            "",
        ]
    )


def test_placement_split_of_a_real_capture_by_pass_and_thread() -> None:
    """py-spy on the placement manager for 20 s of the 1,000-node backlog.

    Captured before reclaim stopped walking every running gang for each group that fits: its queue pass
    was the round's largest part.
    """
    raw = gzip.decompress((FIXTURES / "placement-pyspy-raw.txt.gz").read_bytes()).decode()
    split = placement_split(raw, ms_per_sample_per_pod=1.0)
    parts = split["parts_ms_per_pod"]
    assert split["samples"] == split["gil_ms_per_pod"] == 762
    assert sum(parts.values()) == 762, "every sample counts for one part"
    assert parts["round: queue pass (status, reclaim)"] == 193
    assert (parts["release pass: decide, tell"], parts["events: write"]) == (114, 114)
    assert parts["release pass: ungate patches"] == 138, "the pool's eight threads, summed"
    assert parts["cache: pod watch events"] == 101
    assert parts["webhooks: watch their configuration"] == 23
    assert parts["webhooks: serve (the gate's door, pins)"] == 5


def test_histogram_deltas_and_the_algorithm_left_for_extenders() -> None:
    before, after = _scrape(1.0, 0.25, 10), _scrape(3.0, 0.75, 30)
    assert histogram_deltas(before, after, "scheduler_scheduling_algorithm_duration_seconds", "x") == {
        "": (2.0, 20.0)
    }
    sums = metric_sums(before, after, "phalanx")
    assert sums["in-tree Filter"] == pytest.approx(0.5)
    assert sums["algorithm minus in-tree filter and score"] == pytest.approx(1.5)


def test_render_and_compare_figures_side_by_side() -> None:
    size = {
        "nodes": 1000,
        "budget": {
            "baseline": {"pods": 1000, "wall_ms_per_pod": 11.0, "cpu_ms_per_pod": {"kube-scheduler": 5.0}},
            "phalanx": {"pods": 500, "wall_ms_per_pod": 28.0, "cpu_ms_per_pod": {"extender": 9.0}},
        },
    }
    text = "\n".join(render_budget({"sizes": [size]}))
    assert "Per-pod budget at 1,000 nodes" in text
    assert "CPU: extender" in text
    figures = dict(budget_figures(size))
    assert figures["phalanx, wall ms per pod in the window"] == 28.0
    assert figures["baseline, CPU: kube-scheduler"] == 5.0
    assert "baseline, CPU: extender" not in figures


def test_the_phalanx_plugin_is_its_own_part_not_an_in_tree_filter() -> None:
    traces = f"""File: phalanx-scheduler
{SEP}
      30ms   phalanx.dev/sidecar/plan.(*Plugin).Filter
             k8s.io/kubernetes/pkg/scheduler/framework/runtime.(*frameworkImpl).RunFilterPlugins
{SEP}
      10ms   k8s.io/kubernetes/pkg/scheduler/framework/plugins/noderesources.(*Fit).Filter
             k8s.io/kubernetes/pkg/scheduler/framework/runtime.(*frameworkImpl).RunFilterPlugins
{SEP}
"""
    parts = go_split(traces, cpu_ms_per_pod=4.0)["parts_ms_per_pod"]
    assert parts == {"phalanx's framework plugin (PhalanxPlan)": 3.0, "in-tree filter plugins": 1.0}


def test_the_sidecar_gets_its_own_column_only_when_it_was_budgeted() -> None:
    budgets: dict[str, dict[str, object]] = {"baseline": {"pods": 10}, "phalanx": {"pods": 5}}
    two = {"nodes": 1000, "budget": budgets}
    three = {"nodes": 1000, "budget": {**budgets, "phalanx-sidecar": {"pods": 7, "error": "no bind"}}}
    header = next(line for line in render_budget({"sizes": [two]}) if "baseline" in line)
    assert "phalanx-sidecar" not in header
    text = render_budget({"sizes": [three]})
    assert "phalanx-sidecar" in next(line for line in text if "baseline" in line and "pods" not in line)
    assert "  phalanx-sidecar: no bind" in text
    assert dict(budget_figures(three))["phalanx-sidecar, pods bound in the window"] == 7


def test_a_hung_profiler_is_killed_and_its_failure_returned() -> None:
    import subprocess
    import sys

    from perf.common import finish_recorder

    argv = [
        sys.executable,
        "-c",
        "import sys, time; sys.stderr.write('attached'); sys.stderr.flush(); time.sleep(60)",
    ]
    with subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True) as hung:
        err = finish_recorder(hung, 1.0)
    assert hung.returncode != 0
    assert err.startswith("did not finish within 1 s and was killed") and err.endswith("attached")
    argv = [sys.executable, "-c", "import sys; sys.stderr.write('done')"]
    with subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True) as ended:
        assert finish_recorder(ended, 10.0) == "done"


def test_api_requests_per_pod_by_verb_and_resource_from_two_real_scrapes() -> None:
    """Two scrapes of a real kube-apiserver around ``kubectl run`` x3, a ``label`` and a ``get pods``."""
    before, after = ((FIXTURES / f"apiserver-metrics-{i}.txt").read_text() for i in (0, 1))
    split = api_requests(before, after, pods=3)
    assert split["POST pods"]["calls_per_pod"] == 1.0  # one creation per pod
    assert split["PATCH pods"]["calls_per_pod"] == 0.333  # one label for three pods
    assert split["LIST pods"]["calls_per_pod"] == 0.333
    assert not any(kind.split()[0] in ("WATCH", "WATCHLIST", "CONNECT") for kind in split)
    requests = [v["ms_per_pod"] for k, v in split.items() if not k.startswith("watch events")]
    assert requests == sorted(requests, reverse=True)  # the costliest request kind first
    assert split["watch events pods"]["events_per_pod"] > 1.0  # each pod's events to every pod watcher
    rare = api_requests(before, after, pods=300)  # one label in 300 pods: under the floor, left out
    assert "PATCH pods" not in rare and rare["POST pods"]["calls_per_pod"] == 0.01
    size = {"nodes": 3, "budget": {"phalanx": {"pods": 3, "api_requests": split}}}
    figures = dict(budget_figures(size))
    assert figures["phalanx, API POST pods: calls"] == 1.0
    assert figures["phalanx, API watch events pods: events"] == split["watch events pods"]["events_per_pod"]
