"""What ``phalanx why`` is asked about, and how the asked pods are found in a snapshot.

A user names a pod (``NAMESPACE/POD``, or ``POD`` in the namespace given apart) or a gang
(``podgroup/NAME``). The subject is what the rest of the explanation reads: the pod the filter is run
for (the asked pod, or a gang's largest waiting member, the one the gang planner places first), the
gang's members and its PodGroup.
"""

from __future__ import annotations

from dataclasses import dataclass

from scheduling.cluster.snapshot import ClusterSnapshot
from scheduling.model import GROUP_LABEL, Pod, PodGroup

GROUP_WORDS = frozenset({"podgroup", "podgroups", "pg"})
POD_WORDS = frozenset({"pod", "pods", "po"})


class ExplainError(ValueError):
    """What was asked about does not exist, or cannot be read as a pod or PodGroup name."""


@dataclass(frozen=True, slots=True)
class Target:
    """A pod or a PodGroup, by namespace and name.

    Attributes:
        kind: ``pod`` or ``podgroup``.
        namespace: its namespace.
        name: its name.
    """

    kind: str
    namespace: str
    name: str

    @property
    def key(self) -> str:
        """``namespace/name``."""
        return f"{self.namespace}/{self.name}"

    @classmethod
    def parse(cls, text: str, namespace: str = "default") -> Target:
        """Read ``NS/POD``, ``POD``, ``pod/POD``, ``podgroup/NAME`` (or ``pg/``), or ``podgroup/NS/NAME``.

        ``namespace`` applies when the text names none. A namespace called ``pod`` or ``podgroup`` must
        therefore be given apart.

        >>> Target.parse("ml/train-0")
        Target(kind='pod', namespace='ml', name='train-0')
        >>> Target.parse("podgroup/llama", "ml").key, Target.parse("pg/ml/llama").kind
        ('ml/llama', 'podgroup')

        Raises:
            ExplainError: the text has an empty part or too many parts.
        """
        parts = text.split("/")
        kind = "pod"
        if len(parts) > 1 and parts[0].lower() in GROUP_WORDS | POD_WORDS:
            kind = "podgroup" if parts[0].lower() in GROUP_WORDS else "pod"
            parts = parts[1:]
        if len(parts) == 1:
            parts = [namespace, parts[0]]
        if len(parts) != 2 or not all(parts):
            msg = f"cannot read {text!r}: give NAMESPACE/POD, POD with a namespace, or podgroup/NAME"
            raise ExplainError(msg)
        return cls(kind, parts[0], parts[1])


@dataclass(frozen=True, slots=True)
class Subject:
    """What the explanation reads about the target.

    Attributes:
        target: what was asked.
        pod: the pod the filter is run for; ``None`` for a PodGroup without any pod.
        members: the gang's pods, by name (``(pod,)`` for a pod on its own).
        group: the PodGroup, if the pod is in a gang and it exists.
        gang: the pod belongs to a gang (gang scheduling on and a PodGroup label).
    """

    target: Target
    pod: Pod | None
    members: tuple[Pod, ...]
    group: PodGroup | None
    gang: bool

    @property
    def name(self) -> str:
        """``pod ml/p``, ``pod ml/w0 of gang ml/g`` or ``gang ml/g``: how sentences name it."""
        if self.target.kind == "podgroup":
            return f"gang {self.target.key}"
        if self.gang and self.pod is not None:
            return f"pod {self.target.key} of gang {self.pod.group_key}"
        return f"pod {self.target.key}"


def subject_of(snapshot: ClusterSnapshot, target: Target, *, gangs: bool = True) -> Subject:
    """Find ``target`` in ``snapshot``.

    Raises:
        ExplainError: no such pod; or no such PodGroup and no pod labelled into it.
    """
    if target.kind == "pod":
        pod = snapshot.pod(target.namespace, target.name)
        if pod is None:
            msg = f"pod {target.key} not found: the cluster has no pod of that name in that namespace"
            raise ExplainError(msg)
        key = pod.group_key
        if not gangs or key is None:
            return Subject(target, pod, (pod,), None, False)
        members = snapshot.members(key)
        if all(m.uid != pod.uid for m in members):
            members = sorted([*members, pod], key=lambda p: p.name)
        return Subject(target, pod, tuple(members), snapshot.podgroup(key), True)
    group, members = snapshot.podgroup(target.key), snapshot.members(target.key)
    if group is None and not members:
        msg = (
            f"podgroup {target.key} not found: no PodGroup of that name and no pod labelled "
            f"{GROUP_LABEL}={target.name} in namespace {target.namespace}"
        )
        raise ExplainError(msg)
    waiting = sorted(
        (m for m in members if m.node_name is None and not m.terminating),
        key=lambda p: (-p.requests.gpus, p.name),
    )
    pod = waiting[0] if waiting else (members[0] if members else None)
    return Subject(target, pod, tuple(members), group, True)
