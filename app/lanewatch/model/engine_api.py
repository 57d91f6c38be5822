"""The contracts between the rooms that run an engine and the ones that use it, in code.

`EngineApi` is what the dashboard asks of an engine: `engine.Engine` (in this process),
`engine.EngineProcess` (in a child) and `hosts.many.ManyHosts` (the local one plus every
host's stream) satisfy it. `Routes` is what the actions ask of a dashboard of many hosts: which
host a key belongs to, and that host's `FarHost` (its own lanewatch, over ssh, with its own
checks); `ManyHosts` satisfies it. They live here, below every room that implements or uses
them, so `actions`, `engine`, `hosts` and `tui` share one definition
(`tests/processes/test_engine_api.py` checks each implementation against them).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from lanewatch.model.views import Changes

ChangesSink = Callable[[Changes], None]  # called on the engine's own thread


class EngineApi(Protocol):
    def start(self, on_changes: ChangesSink) -> None:
        """Start watching; every batch of changes goes to `on_changes`, a full one first."""
        ...

    def stop(self) -> None: ...

    def rescan(self) -> None:
        """Ask for a full rescan (its picture arrives as a full batch)."""
        ...

    def acknowledge(self, incident_id: str) -> None: ...

    def quiet_for(self) -> float | None:
        """Seconds since the engine last sent anything (keep-alives included); None when it
        cannot fall silent (it runs in this process) or is not running."""
        ...


class Result(Protocol):
    """What every action gives back, here or on another host: whether it did what was asked,
    and one line for people (`actions.results` re-exports it for the actions here)."""

    @property
    def ok(self) -> bool: ...

    @property
    def message(self) -> str: ...


class FarHost(Protocol):
    """Another host's lanewatch, doing an action there with its own checks."""

    @property
    def name(self) -> str: ...

    def kill(
        self, key: str, signal_name: str, seen: tuple[int | None, float | None] | None
    ) -> Result: ...

    def clear(self, key: str) -> Result: ...

    def restore(self, trash_id: str) -> Result: ...


class Routes(Protocol):
    def far(self, key: str) -> tuple[FarHost, str] | None:
        """(host, its own key) for another host's namespace, incident or trash entry
        (`NAME:…`); None for this host's. Raises `LanewatchError` for a key of a host this
        dashboard does not have."""
        ...
