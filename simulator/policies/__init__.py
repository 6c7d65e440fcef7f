"""Scheduling policies the loop can run, registered by name in one visible list."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from simulator.loop import Policy
from simulator.policies.fifo import Fifo
from simulator.policies.tiresias import Tiresias

POLICIES: Mapping[str, Callable[[], Policy[Any]]] = {
    "fifo": Fifo,
    "tiresias": Tiresias,
}
"""Policy name -> a factory of the policy with its default parameters."""
