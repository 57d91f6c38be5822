"""The incident kinds' registry is the one list: every kind a detector emits is in it, and every
place that lists or describes kinds (help, empty view, colours, demo, docs) reads it or agrees
with it. A new kind that skips a step fails here."""

from __future__ import annotations

import ast
import importlib
import pkgutil
import re
from pathlib import Path

from rich.console import Console

import lanewatch
from lanewatch.demo.scenario import LANE_PLAN
from lanewatch.model import detectors
from lanewatch.model.kinds import KINDS, Severity, kind_of, severity_of
from lanewatch.model.views import IncidentKind
from lanewatch.tui.columns import SEVERITY_STYLES, kind_cell
from lanewatch.tui.empty import collisions_hint
from lanewatch.tui.screens.help import kinds_legend

APP = Path(lanewatch.__file__).parent
DOCS = APP.parents[1] / "docs" / "engine.md"


def kinds_named_in(source: str) -> set[str]:
    """The `IncidentKind.X` members a module's code names (what it can emit)."""
    names = set()
    for node in ast.walk(ast.parse(source)):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id == "IncidentKind"
        ):
            names.add(IncidentKind[node.attr].value)
    return names


def test_every_kind_has_one_complete_entry() -> None:
    assert set(KINDS) == {k.value for k in IncidentKind}
    for name, entry in KINDS.items():
        assert entry.name.value == name
        assert entry.label and entry.label == entry.label.strip() and "\n" not in entry.label
        assert isinstance(entry.severity, Severity)
        assert entry.explanation.endswith(".") and "\n" not in entry.explanation
        assert len(entry.explanation) <= 100, name  # one line, also in the help at 80 columns
        assert entry.detectors, name
        for detector in entry.detectors:
            assert detector.__module__.startswith("lanewatch.model.detectors."), detector


def test_every_kind_a_detector_emits_is_registered_to_that_detector() -> None:
    registered: dict[str, set[str]] = {}
    for entry in KINDS.values():
        for detector in entry.detectors:
            registered.setdefault(detector.__module__, set()).add(entry.name.value)
    modules = [
        m.name for m in pkgutil.iter_modules(detectors.__path__, "lanewatch.model.detectors.")
    ]
    assert sorted(modules) == sorted(registered)  # no detector module outside the registry
    for name in modules:
        module = importlib.import_module(name)
        source = Path(module.__file__ or "").read_text()
        assert kinds_named_in(source) == registered[name], name


def test_no_incident_is_made_outside_the_detectors() -> None:
    """A kind emitted elsewhere would escape the registry: only the detectors, the enum's
    home and the registry itself name `IncidentKind` members."""
    allowed = {APP / "model" / "views.py", APP / "model" / "kinds.py"}
    for path in APP.rglob("*.py"):
        if path in allowed or path.parent == APP / "model" / "detectors":
            continue
        assert not kinds_named_in(path.read_text()), path


def test_the_docs_table_lists_every_kind_with_its_severity() -> None:
    text = DOCS.read_text()
    table = text[text.index("| kind | severity |") :].split("\n\n", 1)[0]
    rows = re.findall(r"^\| `([a-z-]+)` \| (\w+) \|", table, re.MULTILINE)
    assert sorted(rows) == sorted((k, e.severity.value) for k, e in KINDS.items())


def test_the_help_lists_every_kind_with_its_explanation() -> None:
    console = Console(width=400, record=True, color_system=None)
    console.print(kinds_legend())
    shown = console.export_text()
    for name, entry in KINDS.items():
        line = rf"^{re.escape(name)} +{entry.severity.value}: {re.escape(entry.explanation)} *$"
        assert re.search(line, shown, re.MULTILINE), name


def test_the_empty_collisions_view_names_every_kind() -> None:
    hint = collisions_hint().replace("\n", " ")
    for entry in KINDS.values():
        assert f" {entry.label}" in hint
    assert all(len(line) <= 78 for line in collisions_hint().splitlines())


def test_the_demo_shows_every_kind() -> None:
    assert {k for spec in LANE_PLAN for k in spec.incidents} == set(KINDS)


def test_a_kind_is_coloured_by_its_severity_and_an_unknown_one_stays_visible() -> None:
    assert set(SEVERITY_STYLES) == set(Severity)
    for name, entry in KINDS.items():
        assert kind_cell(name).style == SEVERITY_STYLES[entry.severity]
    # A newer engine's record on a shared root: shown as typed (inert), never overlooked.
    assert kind_of("future-kind") is None and severity_of("future-kind") is Severity.HIGH
    cell = kind_cell("future\x1b[2J")
    assert cell.plain == "future\\x1b[2J" and cell.style == SEVERITY_STYLES[Severity.HIGH]
