"""In-memory stand-ins for the node agent's collaborators: the annotation store and the stop signal."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from kubeio.errors import KubeError, NotFoundError


@dataclass
class MemoryStore:
    """Nodes' annotations in a dict; ``failures`` are raised, one per call, before answering."""

    annotations: dict[tuple[str, str], str] = field(default_factory=dict)
    failures: list[Exception] = field(default_factory=list)
    nodes: frozenset[str] = frozenset({"gpu-node-1"})
    patches: list[tuple[str, str, str | None]] = field(default_factory=list)
    version: int = 100

    def get(self, node: str, key: str) -> str | None:
        self._fail_or_check(node)
        return self.annotations.get((node, key))

    def patch(self, node: str, key: str, value: str | None) -> str:
        self._fail_or_check(node)
        self.patches.append((node, key, value))
        if value is None:
            self.annotations.pop((node, key), None)
        else:
            self.annotations[(node, key)] = value
        self.version += 1
        return str(self.version)

    def _fail_or_check(self, node: str) -> None:
        if self.failures:
            raise self.failures.pop(0)
        if node not in self.nodes:
            raise NotFoundError(404, "NotFound", f'nodes "{node}" not found')


@dataclass
class CountingStop:
    """A stop signal that records each wait and sets itself after ``cycles`` waits."""

    cycles: int
    waits: list[float] = field(default_factory=list)

    def is_set(self) -> bool:
        return len(self.waits) >= self.cycles

    def wait(self, timeout: float | None = None) -> bool:
        self.waits.append(timeout if timeout is not None else -1.0)
        return self.is_set()


def kube_errors(*statuses: int) -> Iterable[Exception]:
    """One ``KubeError`` per status, the way ``kubeio`` raises them."""
    return [KubeError(status, "Test", f"injected {status}") for status in statuses]
