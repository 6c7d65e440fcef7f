"""The benchmark harness: phalanx measured through the real kube-scheduler.

Run ``hack/bench [--quick]`` from the repository root (see ``hack/perf/README.md``). The harness is not
part of the test suite: it prints a table of figures, writes them as JSON, and says which goal each one
meets, but it never fails on a figure. The package lives in ``hack/`` so it can import the test bed
(``localbed``, ``localcluster``, ``workload``) the same way the demo and the end-to-end tests do.
"""
