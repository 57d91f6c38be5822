"""`refused-claim`: a claim the lock refused, as the claimant wrote it in the ledger. Pure."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lanewatch.model.detection import detects
from lanewatch.model.facts import LedgerLine
from lanewatch.model.observation import Observation
from lanewatch.model.views import Evidence, Grade

KIND = "refused-claim"


@detects(KIND, reads=LedgerLine)
def refused_claim(victim: str, line: Mapping[str, Any], ledger_path: str) -> Observation | None:
    """One `claim-refused` line of the victim's ledger (written by the refused claimant)."""
    if line.get("event") != "claim-refused":
        return None
    t = line.get("time")
    if not isinstance(t, int | float):
        return None
    by_pid = line.get("by_pid", line.get("pid"))
    lane = line.get("lane")
    owner_pid = line.get("owner_pid")
    ev = Evidence(
        path=ledger_path,
        time=float(t),
        size=None,
        sha256=None,
        grade=Grade.KNOWN.value,
        writer=f"pid {by_pid}",
        note=f"claim by pid {by_pid} refused; the lock was held (owner pid {owner_pid})",
        key=f"refused:{t}:{by_pid}",
    )
    return Observation(
        kind=KIND,
        victim=victim,
        intruder_key=f"{lane}:{by_pid}",
        intruder={"lane": lane, "pid": by_pid},
        evidence=ev,
        summary=f"pid {by_pid} tried to claim lane {lane} while pid {owner_pid} owned it",
    )
