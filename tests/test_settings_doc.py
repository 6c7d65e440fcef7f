"""The admin guide's settings tables say what the declarations say (``kubeio.setting.reference``).

Run ``python -m tests.test_settings_doc`` to print the tables after changing a declaration.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from extender.extender_settings import SETTINGS as EXTENDER
from extender.extender_settings import ExtenderSettings
from kubeio.setting import Setting, reference
from nodeagent.agent_settings import SETTINGS as NODE_AGENT
from nodeagent.agent_settings import AgentSettings
from placement.dispatcher import SETTINGS as DISPATCHER
from placement.dispatcher import DispatcherSettings
from placement.placement_settings import SETTINGS as PLACEMENT
from placement.placement_settings import PlacementSettings

GUIDE = Path(__file__).resolve().parent.parent / "docs" / "admin-guide.md"

TABLES: dict[str, tuple[tuple[Setting, ...], object]] = {
    "extender": (EXTENDER, ExtenderSettings()),
    "placement manager": (PLACEMENT, PlacementSettings()),
    "node agent": (NODE_AGENT, AgentSettings()),
    "dispatcher": (DISPATCHER, DispatcherSettings()),
}


@pytest.mark.parametrize("name", sorted(TABLES))
def test_the_guide_holds_each_entrypoints_table_as_declared(name: str) -> None:
    table, defaults = TABLES[name]
    expected = reference(table, defaults)
    assert expected in GUIDE.read_text(), f"docs/admin-guide.md: the {name}'s table is now\n{expected}"


if __name__ == "__main__":
    for title, (rows, values) in TABLES.items():
        print(f"#### {title}\n\n{reference(rows, values)}")
