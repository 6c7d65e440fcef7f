"""NVLink islands: the groups of free GPUs on one node that NVLink joins, directly or through others.

An all-reduce inside an island runs on NVLink; across islands it falls back to PCIe or the CPU link. An
operator asking "could a 4-GPU job still get NVLink on this node?" needs the islands of the GPUs that are
free now, not of all GPUs: on a node of bridged pairs, one pod on GPU 0 leaves GPU 1 an island of one.

Only NVLink joins GPUs into an island, and only through free GPUs (NCCL does not relay through a GPU
outside its communicator). On an NVSwitch node every free GPU with NVLinks reaches every other through
the switch, so they form one island.
"""

from __future__ import annotations

from collections.abc import Iterable

from scheduling.topology.document import TopologyDocument


def nvlink_islands(document: TopologyDocument, gpus: Iterable[int]) -> tuple[tuple[int, ...], ...]:
    """The NVLink islands among ``gpus``: each sorted, largest first, then by lowest index.

    A GPU with no NVLink to another of ``gpus`` is an island of its own. Indices the document does not
    describe are ignored.

    >>> from scheduling.topology.builders import uniform
    >>> from scheduling.topology.document import TopologyDocument
    >>> from scheduling.topology.gpu_info import GpuInfo
    >>> from scheduling.topology.links import parse_link
    >>> bridged = TopologyDocument(
    ...     gpus=tuple(GpuInfo(i) for i in range(4)),
    ...     links=(parse_link(0, 1, "NV4"), parse_link(0, 2, "SYS"), parse_link(0, 3, "SYS"),
    ...            parse_link(1, 2, "SYS"), parse_link(1, 3, "SYS"), parse_link(2, 3, "NV4")))
    >>> nvlink_islands(bridged, [0, 1, 2, 3]), nvlink_islands(bridged, [1, 2, 3])
    (((0, 1), (2, 3)), ((2, 3), (1,)))
    >>> nvlink_islands(uniform(4, "PIX"), [0, 2])
    ((0,), (2,))
    """
    free = sorted({g for g in gpus if 0 <= g < document.gpu_count})
    parent = {g: g for g in free}

    def root(g: int) -> int:
        while parent[g] != g:
            parent[g] = parent[parent[g]]
            g = parent[g]
        return g

    def join(a: int, b: int) -> None:
        ra, rb = root(a), root(b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)

    if document.nvswitch:
        linked = [g for g in free if document.nvlink_count(g) > 0]
        for g in linked[1:]:
            join(linked[0], g)
    else:
        for link in document.links:
            if link.nvlinks > 0 and link.a in parent and link.b in parent:
                join(link.a, link.b)
    islands: dict[int, list[int]] = {}
    for g in free:
        islands.setdefault(root(g), []).append(g)
    return tuple(sorted((tuple(members) for members in islands.values()), key=lambda i: (-len(i), i)))
