"""docs/architecture.md says what pyproject.toml's import-linter contracts enforce: its layer
line is the layers contract, and its table of rooms names every package of `app/lanewatch/`
and no other (a room added, moved or renamed without its words fails here)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DOC = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
PACKAGE = REPO / "app" / "lanewatch"


def _contract_layers() -> list[list[str]]:
    contracts = PYPROJECT["tool"]["importlinter"]["contracts"]
    (layers,) = [
        c["layers"]
        for c in contracts
        if c["type"] == "layers" and c.get("containers") == ["lanewatch"]
    ]
    return [sorted(part.strip() for part in line.split("|")) for line in layers]


def _doc_layers() -> list[list[str]]:
    """The `**Layers** … top to bottom: `cli` → `tui | agents` → …` paragraph."""
    paragraph = DOC[DOC.index("**Layers**") :].split("\n\n", 1)[0]
    line = " ".join(paragraph.split()).split("top to bottom:", 1)[1].split(". ", 1)[0]
    floors = line.split("→")
    return [sorted(re.findall(r"[a-z_]+", floor.replace("`", " "))) for floor in floors]


def _doc_rooms() -> set[str]:
    """The first column of the rooms table: `cli/`, `demo/`, `drill/`, `errors.py`, …"""
    table = DOC[DOC.index("| room |") :].split("\n\n", 1)[0]
    rooms: set[str] = set()
    for row in table.splitlines()[2:]:
        first = row.split("|")[1]
        rooms |= {re.sub(r"(/|\.py)$", "", name) for name in re.findall(r"`([^`]+)`", first)}
    return rooms


def _packages() -> set[str]:
    return {p.parent.name for p in PACKAGE.glob("*/__init__.py")}


def test_the_docs_layer_line_is_the_layers_contract() -> None:
    assert _doc_layers() == _contract_layers()


def test_every_package_is_a_room_of_the_table_and_of_the_layers() -> None:
    in_layers = {room for floor in _contract_layers() for room in floor}
    assert _packages() <= _doc_rooms(), "a package docs/architecture.md does not describe"
    assert _packages() <= in_layers, "a package the layers contract does not place"
    modules = {p.stem for p in PACKAGE.glob("*.py")} - {"__init__", "__main__"}
    assert _doc_rooms() == _packages() | modules, "a room the tree does not have"


def test_every_part_of_the_dashboard_is_a_layer_and_is_named_in_its_row() -> None:
    """`tui/` has a layers contract of its own (no circle across screens and the app): every
    sub-package and top-level module of it sits on a floor, and the rooms table's `tui/` row
    names each."""
    contracts = PYPROJECT["tool"]["importlinter"]["contracts"]
    (layers,) = [
        c["layers"]
        for c in contracts
        if c["type"] == "layers" and c.get("containers") == ["lanewatch.tui"]
    ]
    tui = PACKAGE / "tui"
    parts = {p.parent.name for p in tui.glob("*/__init__.py")}
    parts |= {p.stem for p in tui.glob("*.py")} - {"__init__"}
    assert {part for line in layers for part in line.split(" | ")} == parts
    (row,) = [line for line in DOC.splitlines() if line.startswith("| `tui/` |")]
    unnamed = {p for p in parts if f"`{p}/`" not in row and f"`{p}.py`" not in row}
    assert not unnamed, "a part of tui/ docs/architecture.md does not name"
