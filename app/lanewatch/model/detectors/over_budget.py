"""`over-budget`: a lane holds more disk or memory than its root's budget gives it, or its
disk will pass the budget within `AHEAD` seconds at the rate it grows (`lanes/budgets.py`).
Pure: the engine hands the figures (`engine/budgetintake.py`)."""

from __future__ import annotations

from lanewatch.model.detection import detects
from lanewatch.model.facts import BudgetFigure
from lanewatch.model.observation import Observation
from lanewatch.model.units import size
from lanewatch.model.views import Evidence, Grade

KIND = "over-budget"

AHEAD = 600.0  # seconds: a disk that passes its budget this soon at its rate is warned of now


@detects(KIND, reads=BudgetFigure)
def over_budget(
    victim: str,
    lane: str | None,
    resource: str,
    used: int | None,
    budget: int | None,
    at: float,
    growth: float | None = None,
) -> Observation | None:
    """An observation when `used` is at or over `budget`, or (disk) will be within AHEAD."""
    if used is None or budget is None:
        return None
    soon = growth is not None and growth > 0 and used + growth * AHEAD >= budget
    if used < budget and not soon:
        return None
    over = used >= budget
    what = "over" if over else f"growing {size(round(growth or 0))}/s toward"
    note = f"{resource}: {size(used)}, {what} a budget of {size(budget)}"
    ev = Evidence(
        path=None,
        time=at,
        size=used,
        sha256=None,
        grade=Grade.KNOWN.value,
        writer=None,
        note=note,
        key=f"budget:{resource}:{budget}:{'over' if over else 'soon'}",
    )
    return Observation(
        kind=KIND,
        victim=victim,
        intruder_key=f"budget:{resource}",
        intruder={"lane": lane, "resource": resource, "budget": budget},
        evidence=ev,
        summary=f"lane {lane}: {note}",
        victim_lane=lane,
    )
