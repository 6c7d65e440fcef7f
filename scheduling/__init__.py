"""The pure scheduling core of phalanx.

Everything in this package is a function of its inputs: a cluster snapshot, the pod being decided and,
where time matters, ``now`` as a parameter. It performs no I/O, reads no clock, environment or random
source, so every decision can be unit-tested with builders and replayed from a saved snapshot. The
import-linter contracts in ``pyproject.toml`` enforce this (docs/architecture.md §1).
"""
