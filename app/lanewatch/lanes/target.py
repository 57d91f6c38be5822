"""Where a lane lives, before anyone claims it, and the variable that names it to a lane's
processes. Below `lane.py` (the claim) and `nested.py` (who owns it for us), which both need it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from lanewatch.lanes.checkout import Checkout

ENV_NAMESPACE = "LANEWATCH_NAMESPACE"


@dataclass(frozen=True, slots=True)
class LaneTarget:
    """Where a lane lives, before anyone claims it."""

    checkout: Checkout
    lane: str
    root: Path
    namespace: Path
