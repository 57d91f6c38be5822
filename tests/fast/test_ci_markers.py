"""The files tests/conftest.py names for a marker that CI selects by (`floors`: .ci/lowest runs
them at the dependency floors) exist: a renamed file must not drop out of its job unseen."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import FAST, FLOORS

TESTS = Path(__file__).resolve().parents[1]


def test_every_file_marked_floors_exists() -> None:
    assert not sorted(name for name in FLOORS if not (TESTS / name).is_file())


def test_every_module_listed_fast_exists() -> None:
    found = {path.name for path in TESTS.rglob("test_*.py")}
    assert not sorted(set(FAST) - found)
