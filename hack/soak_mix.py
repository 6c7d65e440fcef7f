"""The soak's workload mix, in one place: the soak drives it, ``hack/soak_bound.py`` bounds it.

Each arrival is a single pod (``single_share`` of them) of ``single_gpus`` GPUs, or a gang of
``gang_sizes`` one-GPU members; every pod runs a uniform ``seconds`` range.
"""

from __future__ import annotations

from dataclasses import dataclass
from statistics import fmean


@dataclass(frozen=True, slots=True)
class Mix:
    """What one arrival of the soak is; sizes are drawn uniformly from the tuples (repeats weigh)."""

    single_share: float = 0.7
    single_gpus: tuple[int, ...] = (1, 1, 1, 2, 2, 4, 8)
    gang_sizes: tuple[int, ...] = (2, 2, 4, 4, 8, 16, 32, 64)
    seconds: tuple[float, float] = (5.0, 40.0)

    @property
    def pods_per_arrival(self) -> float:
        """Pods one arrival creates on average (the soak paces arrivals by it)."""
        return self.single_share + (1 - self.single_share) * fmean(self.gang_sizes)


MIX = Mix()
