"""Plot average JCT and resizes + moves per Pollux workload, before and after, from the table files.

    .venv/bin/python hack/plot_before_after.py docs/results/simulator

reads ``before/workload-N.txt`` (the phalanx row, jobs' batch fixed), ``fixed-batch/workload-N.txt``
(the phalanx row now, jobs' batch fixed: like for like with before) and ``workload-N.txt`` (the
phalanx-even and phalanx rows, jobs' batch scaled as elastic Horovod scales it), puts Pollux's and
Tiresias's published averages beside them, and writes ``before-after.png``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

PUBLISHED = {"pollux": (2089, 3323, 2189, 2721), "tiresias": (2474, 5145, 3876, 3280)}


def row(path: Path, policy: str) -> tuple[int, int]:
    """(average JCT, resizes + moves) of ``policy``'s row in a table file."""
    for line in path.read_text().splitlines():
        cells = line.split()
        if cells and cells[0] == policy:
            return int(cells[2].replace(",", "")), int(cells[10]) + int(cells[11])
    msg = f"{path}: no row for {policy}"
    raise SystemExit(msg)


def main(root: Path) -> None:
    """Read the tables under ``root`` and write the plot there."""
    workloads = (1, 2, 3, 4)
    series = {
        "before: phalanx (even), batch fixed": [
            row(root / "before" / f"workload-{n}.txt", "phalanx") for n in workloads
        ],
        "after: phalanx, batch fixed": [
            row(root / "fixed-batch" / f"workload-{n}.txt", "phalanx") for n in workloads
        ],
        "after: phalanx-even, batch scaled": [
            row(root / f"workload-{n}.txt", "phalanx-even") for n in workloads
        ],
        "after: phalanx, batch scaled": [row(root / f"workload-{n}.txt", "phalanx") for n in workloads],
    }
    fig, (jct, churn) = plt.subplots(1, 2, figsize=(13, 5.6))
    width = 0.13
    for i, (name, values) in enumerate(series.items()):
        xs = [n + (i - 2.5) * width for n in workloads]
        jct.bar(xs, [v[0] for v in values], width, label=name)
        churn.bar(xs, [v[1] for v in values], width, label=name)
    for i, (name, values) in enumerate(PUBLISHED.items(), start=len(series)):
        xs = [n + (i - 2.5) * width for n in workloads]
        jct.bar(xs, values, width, label=f"published {name}", alpha=0.6)
    jct.set(title="Average JCT (s), Pollux workloads", xlabel="workload", xticks=workloads)
    churn.set(title="Resizes + moves (all jobs)", xlabel="workload", xticks=workloads)
    jct.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.13), ncol=2)
    churn.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.13), ncol=2)
    fig.tight_layout()
    fig.savefig(root / "before-after.png", dpi=110)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
