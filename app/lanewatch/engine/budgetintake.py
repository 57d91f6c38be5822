"""The engine's side of budgets: each footprint reading checked against the lane's
root's `budgets.toml` (`lanes/budgets.py`), an `over-budget` observation where it is over (or
its disk soon will be), handed to the model keeper like every intake's findings."""

from __future__ import annotations

from collections.abc import Mapping

from lanewatch.engine.intake import Found, Namespaces
from lanewatch.lanes.budgets import BudgetFiles
from lanewatch.model import footprint as fp
from lanewatch.model import model as m
from lanewatch.model.facts import BudgetFigure
from lanewatch.model.kinds import detect
from lanewatch.model.views import Footprint


class BudgetIntake:
    def __init__(self, namespaces: Namespaces) -> None:
        self._namespaces = namespaces
        self._files = BudgetFiles()

    def check(self, footprints: Mapping[str, Footprint]) -> Found:
        out = Found()
        known = self._namespaces()
        for key, reading in footprints.items():
            rec = known.get(key)
            if rec is None or rec.owner is None:
                continue
            budgets = self._files.of(rec.root)
            if budgets is None:
                continue
            limits = budgets.of(rec.owner.lane)
            figures = (
                ("disk", rec.allocated, fp.growth(rec.disk_marks)),
                ("memory", reading.memory, None),
            )
            for resource, used, growth in figures:
                lane, budget = rec.owner.lane, limits.get(resource)
                fact = BudgetFigure(key, lane, resource, used, budget, reading.at, growth)
                for obs in detect(fact):
                    out.emit(m.Observed(obs, rec.root))
        return out
