"""The incident kinds' registry is the one list, and it drives detection: every detector is
registered under the kind it declares and reads one type of fact by its fields; `detect` runs
the detectors of a fact; every place that lists or describes kinds (help, empty view, colours,
metrics, demo, docs) reads the registry or agrees with it. A new kind that skips a step fails
here."""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
import re
import typing
from dataclasses import dataclass, fields
from pathlib import Path

from rich.console import Console

import lanewatch
from lanewatch.demo.scenario import LANE_PLAN
from lanewatch.model import detectors, facts
from lanewatch.model.detection import Detector
from lanewatch.model.detectors.refused_claim import refused_claim
from lanewatch.model.facts import LedgerLine
from lanewatch.model.kinds import KINDS, IncidentKind, Severity, detect, kind_of, severity_of
from lanewatch.tui.screens.help_screen import kinds_legend
from lanewatch.tui.state.empty_hints import collisions_hint
from lanewatch.tui.widgets.view_columns import SEVERITY_STYLES, kind_cell

APP = Path(lanewatch.__file__).parent
DOCS = APP.parents[1] / "docs"
FACT_TYPES = typing.get_args(facts.Fact)


def _detector_modules() -> list[str]:
    return [m.name for m in pkgutil.iter_modules(detectors.__path__, "lanewatch.model.detectors.")]


def test_every_kind_has_one_complete_entry() -> None:
    assert [k.value for k in IncidentKind] == list(KINDS)  # the enum is made from the registry
    assert IncidentKind.SHARED_FILE == "shared-file" and IncidentKind("takeover") in KINDS
    for name, entry in KINDS.items():
        assert entry.name == name and re.fullmatch(r"[a-z]+(-[a-z]+)*", name), name
        assert entry.label and entry.label == entry.label.strip() and "\n" not in entry.label
        assert isinstance(entry.severity, Severity)
        assert entry.explanation.endswith(".") and "\n" not in entry.explanation
        assert len(entry.explanation) <= 100, name  # one line, also in the help at 80 columns
        assert entry.detectors, name
        for detector in entry.detectors:
            assert isinstance(detector, Detector), detector
            assert detector.kind == name, (detector.__qualname__, name)
            assert detector.__module__.startswith("lanewatch.model.detectors."), detector


def test_every_detector_is_in_the_registry_under_the_kind_it_declares() -> None:
    registered = {id(d): e.name for e in KINDS.values() for d in e.detectors}
    found = []
    for name in _detector_modules():
        module = importlib.import_module(name)
        for value in vars(module).values():
            if isinstance(value, Detector) and value.__module__ == name:
                found.append(value)
                assert registered.get(id(value)) == value.kind, (name, value.__qualname__)
    assert sorted(map(id, found)) == sorted(registered)  # nothing registered from elsewhere


def test_every_detector_reads_one_fact_by_its_fields() -> None:
    readers = set()
    for entry in KINDS.values():
        for detector in entry.detectors:
            assert detector.reads in FACT_TYPES, detector.__qualname__
            readers.add(detector.reads)
            names = {f.name: None for f in fields(detector.reads)}
            inspect.signature(detector.run).bind(**names)  # raises when a field has no place
    assert readers == set(FACT_TYPES)  # no fact that nobody reads


def test_detect_runs_the_detectors_of_the_fact_in_the_registrys_order() -> None:
    line = {"event": "claim-refused", "time": 5.0, "pid": 7, "lane": "a", "owner_pid": 3}
    fact = LedgerLine("/r/c.a", line, "/r/c.a/.lanewatch/ledger.jsonl")
    (obs,) = detect(fact)
    assert obs.kind == IncidentKind.REFUSED_CLAIM
    assert obs == refused_claim(fact.victim, line, fact.ledger_path)  # called alike
    assert detect(LedgerLine("/r/c.a", {"event": "released"}, "ledger")) == []

    @dataclass(frozen=True)
    class Unread:
        victim: str

    assert detect(Unread("/r/c.a")) == []  # type: ignore[arg-type]


def test_no_incident_is_made_outside_the_detectors() -> None:
    """An observation made elsewhere would escape the registry: only the detectors, and the
    sightings they build theirs with, call `Observation(...)`."""
    allowed = {APP / "model" / "sightings.py"}
    for path in APP.rglob("*.py"):
        if path in allowed or path.parent == APP / "model" / "detectors":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                assert node.func.id != "Observation", path


def _kinds_tables() -> dict[str, list[tuple[str, str]]]:
    """Every docs table of kinds: its rows' (kind, severity)."""
    out = {}
    for doc in sorted(DOCS.glob("*.md")):
        text = doc.read_text()
        rows = re.findall(r"^\| `([a-z-]+)` \| (high|medium|low) \|", text, re.MULTILINE)
        if rows:
            out[doc.name] = rows
    return out


def test_the_docs_table_lists_every_kind_with_its_severity() -> None:
    tables = _kinds_tables()
    text = (DOCS / "engine.md").read_text()
    table = text[text.index("| kind | severity |") :].split("\n\n", 1)[0]
    rows = re.findall(r"^\| `([a-z-]+)` \| (\w+) \|", table, re.MULTILINE)
    assert sorted(rows) == sorted((k, e.severity.value) for k, e in KINDS.items())
    for doc, rows in tables.items():  # a doc's own table (ports.md) agrees with the registry
        for kind, severity in rows:
            assert kind in KINDS and KINDS[kind].severity.value == severity, (doc, kind)


def test_the_docs_name_no_kind_the_registry_does_not_know() -> None:
    """A list of kinds written out by hand goes stale: the docs' queries and lists name only
    registered kinds, and the metrics page points to the kinds table instead of listing."""
    for doc in sorted(DOCS.glob("*.md")):
        for alternatives in re.findall(r'kind=~"([^"]+)"', doc.read_text()):
            assert set(alternatives.split("|")) <= set(KINDS), (doc.name, alternatives)
    metrics = (DOCS / "metrics.md").read_text()
    row = next(line for line in metrics.splitlines() if line.startswith("| `lanewatch_incidents`"))
    assert "engine.md" in row and not [k for k in KINDS if k in row], row


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
