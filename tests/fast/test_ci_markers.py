"""The files tests/conftest.py names for a marker that CI selects by (`floors`: .ci/lowest runs
them at the dependency floors; `fast`: the fast tests of a file of tests/processes/) exist: a
renamed file must not drop out of its job unseen."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import FLOORS, MIXED

TESTS = Path(__file__).resolve().parents[1]


def test_every_file_marked_floors_exists() -> None:
    assert not sorted(name for name in FLOORS if not (TESTS / name).is_file())


def test_every_module_listed_mixed_exists_in_tests_processes() -> None:
    found = {path.name for path in (TESTS / "processes").glob("test_*.py")}
    assert not sorted(set(MIXED) - found)
