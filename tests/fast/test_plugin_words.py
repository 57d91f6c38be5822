"""The pytest plugin's words about itself, as pure functions: the stamp's command of an xdist
worker, and how many local workers a run starts."""

from __future__ import annotations

import sys
from types import SimpleNamespace
from typing import Any

import pytest

from lanewatch import pytest_plugin as plugin


def test_a_worker_names_the_main_command_and_itself(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw3")
    assert plugin._worker_command('["pytest", "-n", "4"]') == [
        "pytest",
        "-n",
        "4",
        "(xdist worker gw3)",
    ]
    assert plugin._worker_command(["pytest", "-x"]) == ["pytest", "-x", "(xdist worker gw3)"]


@pytest.mark.parametrize("word", ["not json", '{"a": 1}', "[1, 2]", '"pytest"', None])
def test_a_word_that_is_not_an_argv_keeps_this_process_own(
    monkeypatch: pytest.MonkeyPatch, word: str | None
) -> None:
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw0")
    assert plugin._worker_command(word) == sys.argv


def test_outside_a_worker_the_word_is_ignored(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    assert plugin._worker_command('["pytest"]') == sys.argv


def _config(**option: Any) -> Any:
    return SimpleNamespace(option=SimpleNamespace(**option))


@pytest.mark.parametrize(
    ("option", "local"),
    [
        ({"dist": "load", "tx": ["popen", "popen"]}, 2),
        ({"dist": "load", "tx": ["3*popen", "ssh=build//python=python3"]}, 3),
        ({"dist": "load", "tx": ["popen//python=python3.12", "socket=10.0.0.2:8888"]}, 1),
        ({"dist": "no", "tx": []}, 0),
        ({"dist": "no", "tx": ["popen", "popen"]}, 0),
        ({}, 0),  # xdist not loaded: no such options
        ({"dist": "load", "tx": ["x*popen"]}, 0),
    ],
)
def test_local_workers_are_counted_from_the_specs(option: dict[str, Any], local: int) -> None:
    assert plugin._local_workers(_config(**option)) == local
