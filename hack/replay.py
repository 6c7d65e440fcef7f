"""Re-run a saved filter decision offline and say whether it comes out the same.

    hack/replay FILE            # FILE from the extender's GET /debug/decision?pod=namespace/name

Prints the decision then and now (feasible nodes, each rejected node's reason, the group's verdict)
and exits 0 when they are equal, 1 when they differ, 2 when the file cannot be read.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from scheduling.offline.replay import ReplayError, SavedAnswer, replay_filter
from scheduling.topology import TopologyCache


def describe(answer: SavedAnswer) -> list[str]:
    """The answer in lines a person reads."""
    lines = [f"  feasible: {', '.join(answer.feasible) or '(none)'}"]
    lines += [f"  {node}: {message}" for node, message in sorted(answer.rejected.items())]
    if answer.verdict is not None:
        lines.append(f"  verdict: {answer.verdict}")
    return lines


def main(argv: list[str] | None = None) -> int:
    """Replay the file named on the command line."""
    parser = argparse.ArgumentParser(prog="hack/replay", description=__doc__.split("\n\n")[0])
    parser.add_argument("file", type=Path, help="a decision saved from /debug/decision")
    args = parser.parse_args(argv)
    try:
        now, then = replay_filter(args.file.read_bytes(), TopologyCache())
    except (OSError, ReplayError) as exc:
        print(f"replay: {exc}", file=sys.stderr)
        return 2
    print("decision when it was taken:", *describe(then), sep="\n")
    if now == then:
        print("replayed: the same decision")
        return 0
    print("replayed: a DIFFERENT decision:", *describe(now), sep="\n")
    return 1


if __name__ == "__main__":
    sys.exit(main())
