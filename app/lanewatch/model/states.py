"""The namespace states: one entry each, read by every place that styles or explains them. Pure.

An entry says the state in plain words (the help's legend) and how much it asks of a person
(`Severity`, shared with the incident kinds): the dashboard styles a row by its severity, never
by its state's name, so a state added to `NsState` with an entry here gets a look at once. A
state without an entry (a newer engine's) counts as medium: shown, never hidden as "fine".

Adding a state: a member of `NsState`, an entry here (`tests/tui/test_glance.py` checks every
member has one), its rule in `model/classify.py`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from lanewatch.model.kinds import Severity
from lanewatch.model.views import NsState

RANK = {Severity.HIGH: 3, Severity.MEDIUM: 2, Severity.LOW: 1}


@dataclass(frozen=True, slots=True)
class State:
    state: NsState
    meaning: str  # a few words for people, after the state's name in the legend
    severity: Severity | None  # None: all is well, nothing to look at


_STATES = (
    State(NsState.LIVE, "owner alive, heartbeat fresh", None),
    State(NsState.HUNG, "alive, but stopped or its heartbeat overdue", Severity.HIGH),
    State(NsState.UNKNOWN, "could not tell; never treated as dead", Severity.MEDIUM),
    State(NsState.STALE, "owner dead or its pid reused", Severity.MEDIUM),
    State(NsState.ORPHAN, "no valid stamp", Severity.MEDIUM),
    # The runner died or let go while processes it started run on: nobody waits for them.
    State(NsState.HEADLESS, "runner gone, processes of the lane still run", Severity.HIGH),
    State(NsState.RELEASED, "exited cleanly, files kept", Severity.LOW),
)

STATES: Mapping[str, State] = MappingProxyType({s.state.value: s for s in _STATES})


def state_severity(state: str) -> Severity | None:
    """How much a state asks of a person; a state this version has no entry for: medium."""
    entry = STATES.get(str(state))
    return entry.severity if entry is not None else Severity.MEDIUM


def worst(*severities: Severity | None) -> Severity | None:
    """The highest of `severities` (None: all well)."""
    return max(severities, key=lambda s: RANK.get(s, 0) if s is not None else 0, default=None)
