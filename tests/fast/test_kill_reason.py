"""The kill dialog's first line for a collision's intruder (`tui/state/culprit.py`
`kill_reason`): a write names its path, shortened inside the victim's namespace; an
observation without a path (a port clash, a refused claim) names none, and never fails."""

from __future__ import annotations

from dataclasses import replace

from lanewatch.model.views import Evidence
from lanewatch.tui.state.culprit import kill_reason
from tests.tui.fakes import NOW, incident

WROTE = Evidence("/roots/r1/x/tmp/out.log", NOW - 5, 10, None, "known", "pid 555", "wrote")
LISTENS = Evidence(None, NOW - 1, None, None, "inferred", "pid 555", "listens on :3000")


def test_a_write_in_the_victims_namespace_is_named_from_it() -> None:
    said = kill_reason(incident("i1", "/roots/r1/x", evidence=(WROTE,)), "x")
    assert said.startswith("Intruder of i1: it wrote in lane x's namespace ./tmp/out.log, last at")


def test_an_observation_without_a_path_names_none() -> None:
    inc = incident("i2", "/roots/r1/x", kind="port_clash", evidence=(WROTE, LISTENS))
    said = kill_reason(inc, "x")
    assert said.startswith("Intruder of i2: it wrote in lane x's namespace, last at")
    assert "None" not in said


def test_an_incident_without_evidence_says_no_path() -> None:
    said = kill_reason(replace(incident("i3", "/roots/r1/x"), evidence=()), "x")
    assert said == "Intruder of i3: it wrote in lane x's namespace."
