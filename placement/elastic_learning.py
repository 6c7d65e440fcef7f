"""The elastic pass's learning step: each job's progress report becomes a sample, samples a model.

The report is read from the job's pods (``kubeio.mpijob_pods.report_on_pods``), and from the MPIJob
when none carries one: the older place, still read, but a write there can land during the operator's
status update and stall the job, so the job is told once to move it (``kubeio.progress`` says why).
A report counts as a sample only while exactly the workers it names run (one written before a resize
names the old size and is taken when the job runs that many again; one written while the job grows is
a sample of each size it passes). A changed set of samples is returned, to be kept on the MPIJob in the
pass's one write to it, so a restarted placement manager fits the same model (a write that fails is
tried again next pass: the report is still there).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from kubeio.mpijob_pods import report_on_pods
from kubeio.mpijobs import MpiJob
from kubeio.progress import (
    THROUGHPUT_ANNOTATION,
    ReportError,
    parse_report,
    parse_samples,
    record,
    render_samples,
)
from scheduling.cluster.snapshot import ClusterSnapshot
from scheduling.elastic import ElasticJob
from scheduling.elastic.elastic_planner import running_on
from scheduling.elastic.throughput import Sample, Throughput, fit
from scheduling.model import Pod

ON_MPIJOB = (
    f"throughput report written on the MPIJob ({THROUGHPUT_ANNOTATION}): it is read, but a write to the"
    " MPIJob that lands during its MPI Operator's status update fails that sync, and the operator then"
    " backs off from the job for up to minutes; write the report on the pod the reporting process runs in"
    " (docs/elastic-mpijobs.md)"
)
"""The Warning a job reporting on its MPIJob gets, once."""

Tell = Callable[[MpiJob, str, str, str], None]
"""An event on the job, once per job and message: (job, type, reason, message)."""


def learn(
    declared: Mapping[str, MpiJob],
    jobs: Sequence[ElasticJob],
    snapshot: ClusterSnapshot,
    pods: Sequence[Pod],
    tell: Tell,
) -> tuple[dict[str, Throughput], dict[str, str]]:
    """Each job's model, fitted on the samples kept on it and the report it wrote now; changed samples.

    Args:
        declared: the MPIJobs by key, as listed this round.
        jobs: the elastic jobs the pass plans.
        snapshot: the cluster now (where each job's workers run).
        pods: every pod of the snapshot (the reports are on some of them).
        tell: how a job is told about its report (``ElasticPass._tell``).
    """
    models: dict[str, Throughput] = {}
    learned: dict[str, str] = {}
    reporting = [p for p in pods if p.progress is not None]
    for job in jobs:
        mpijob = declared[job.key]
        kept = parse_samples(mpijob.samples)
        found = report_on_pods(mpijob.namespace, mpijob.name, reporting)
        if found is None and mpijob.throughput is not None:
            found = (mpijob.throughput, f"MPIJob {job.key}")
            tell(mpijob, "Warning", "ThroughputReportOnMPIJob", ON_MPIJOB)
        try:
            report = parse_report(found[0] if found else None)
        except ReportError as exc:
            where = found[1] if found else job.key
            tell(mpijob, "Warning", "InvalidThroughputReport", f"on {where}: {exc}")
            report = None
        samples = kept
        on = running_on(job, snapshot.nodes)
        if report is not None and report[0] == sum(on.values()):
            samples = record(kept, Sample(report[0], len(on), report[1]))
        if samples != kept:
            learned[job.key] = render_samples(samples)
        if samples:
            models[job.key] = fit(samples)
    return models, learned
