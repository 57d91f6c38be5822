"""The engine's side of budgets: each footprint reading checked against the lane's
root's `budgets.toml` (`lanes/budgets.py`), an `over-budget` observation where it is over (or
its disk soon will be), handed to the model keeper like every intake's findings."""

from __future__ import annotations

from collections.abc import Mapping

from lanewatch.engine.intake import Found, Namespaces
from lanewatch.lanes.budgets import BudgetFiles
from lanewatch.model import footprint as fp
from lanewatch.model import model as m
from lanewatch.model.detectors.over_budget import over_budget
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
                obs = over_budget(
                    key, rec.owner.lane, resource, used, limits.get(resource), reading.at, growth
                )
                if obs is not None:
                    out.emit(m.Observed(obs, rec.root))
        return out
