"""The engine's side of kernel write attribution (`kernel/attribution.py`): a `KernelBatch`
turned into the file history's records and the model's observations (`intake.Found`), and,
when fanotify lost events, what the roots' health should say (nothing is attributed for the
gap: the worker rescans every root).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from lanewatch.engine.intake import Found
from lanewatch.model import model as m
from lanewatch.model.filehistory import FileHistory

if TYPE_CHECKING:
    from lanewatch.kernel.attribution import KernelBatch


class KernelIntake:
    def __init__(self, *, history: FileHistory) -> None:
        """`history`: where each attributed write is recorded, with its writer."""
        self.history = history

    def batch(self, batch: KernelBatch) -> Found:
        out = Found()
        for path, rec in batch.writes:
            self.history.record(path, rec.time, rec.size, rec.sha256, writer=rec.writer)
        for obs, root in batch.observations:
            out.emit(m.Observed(obs, root))
        return out

    @staticmethod
    def lost(batch: KernelBatch) -> str | None:
        """None, or the notice for every root's health: events were lost, when."""
        if batch.lost is None:
            return None
        when = time.strftime("%X", time.localtime(batch.at))
        return f"kernel attribution lost events ({batch.lost}); rescanned at {when}"
