"""The corpus's scoring (tests/corpus/score.py): which incident is a planted one. Pure."""

from __future__ import annotations

import pytest

from tests.corpus.score import Plant, score

pytestmark = pytest.mark.corpus  # tests/corpus: run apart as a CI job
NS = "/r/co.victim"
PLANTS = (
    Plant("cross-lane-write", "cross", victim=NS, path=f"{NS}/tmp/x.json"),
    Plant("shared-file", "shared", path="/tmp/fixed.json"),
    Plant("takeover", "took", victim="/r/co.taken"),
)


def incident(kind: str, ident: str, **fields: object) -> dict[str, object]:
    return {"kind": kind, "id": ident, "evidence": [], **fields}


def test_planted_incidents_are_found_and_the_others_invented() -> None:
    seen = [
        incident("cross-lane-write", "a", victim=NS, evidence=[{"path": f"{NS}/tmp/x.json"}]),
        incident("shared-file", "b", path="/tmp/fixed.json"),
        incident("takeover", "c", victim="/r/co.taken"),
        incident("cross-lane-write", "d", victim="/r/co.click", path="/r/co.click/tmp/#1"),
        incident("shared-file", "e", path="/tmp/log"),
    ]
    got = score(PLANTS, seen)
    assert (got.planted, got.found, got.invented) == (3, 3, 2)
    assert got.invented_ids == ("d", "e") and got.precision == 0.6 and got.recall == 1.0
    assert not got.ok()


def test_a_plant_matches_only_its_kind_victim_and_path() -> None:
    seen = [
        incident("shared-file", "a", victim=NS, path=f"{NS}/tmp/x.json"),  # wrong kind
        incident("cross-lane-write", "b", victim="/r/co.other", path=f"{NS}/tmp/x.json"),
        incident("takeover", "c", victim="/r/co.victim"),  # another lane taken over
    ]
    got = score(PLANTS, seen)
    assert got.found == 0 and got.invented == 3 and got.recall == 0.0 and got.precision == 0.0
    assert got.missed == ("cross", "shared", "took")


def test_a_recorded_line_matches_by_its_latest_write() -> None:
    line = incident("cross-lane-write", "a", victim=NS, path=None)
    line["latest"] = {"path": f"{NS}/tmp/x.json"}
    got = score(PLANTS[:1], [line])
    assert got.found == 1 and got.invented == 0


def test_no_incident_and_no_plant_is_a_clean_score() -> None:
    got = score((), [])
    assert got.ok() and got.precision is None and got.recall is None
    assert got.line() == "planted 0  found 0  invented 0  precision n/a  recall n/a"
