"""`takeover`: a live owner's stamp rewritten by another owner, with no release. Pure."""

from __future__ import annotations

from typing import Any

from lanewatch.lanes.stamp import OwnerState, Stamp
from lanewatch.linux.procid import Liveness
from lanewatch.model.detection import detects
from lanewatch.model.facts import StampReplaced
from lanewatch.model.observation import Observation
from lanewatch.model.views import Evidence, Grade

KIND = "takeover"


def owner_key(stamp: Stamp) -> str:
    return f"{stamp.host}:{stamp.boot_id}:{stamp.pid}:{stamp.start_ticks}"


def _who(stamp: Stamp) -> dict[str, Any]:
    return {
        "lane": stamp.lane,
        "pid": stamp.pid,
        "host": stamp.host,
        "checkout_id": stamp.checkout_id,
        "command": list(stamp.command),
    }


@detects(KIND, reads=StampReplaced)
def takeover(
    victim: str,
    previous: Stamp | None,
    current: Stamp,
    *,
    previous_alive: Liveness | None,
    previous_released: bool,
    previous_fresh: bool,
    at: float,
    sha256: str | None = None,
    path: str | None = None,
) -> Observation | None:
    """A stamp rewritten by another owner while the previous one still lives.

    `previous_alive` is the kernel's verdict on the previous owner taken when the new stamp was
    seen (None for a remote owner: then `previous_fresh`, its heartbeat, is what we have).
    `previous_released` says the ledger recorded the previous owner's release.
    """
    if previous is None or previous.state is not OwnerState.LIVE:
        return None
    if current.state is not OwnerState.LIVE or owner_key(previous) == owner_key(current):
        return None
    if previous_released:
        return None
    if previous_alive is not None:
        if previous_alive not in (Liveness.ALIVE, Liveness.STOPPED):
            return None
        grade, how = Grade.KNOWN, f"pid {previous.pid} was {previous_alive.value}"
    elif previous_fresh:
        grade, how = Grade.INFERRED, f"its heartbeat on {previous.host} was fresh"
    else:
        return None
    ev = Evidence(
        path=path,
        time=at,
        size=None,
        sha256=sha256,
        grade=grade.value,
        writer=f"pid {current.pid} on {current.host} (lane {current.lane})",
        note=(
            f"stamp of pid {previous.pid} (lane {previous.lane}) replaced by pid {current.pid} "
            f"(lane {current.lane}) while {how}, with no release in the ledger"
        ),
        key=f"takeover:{owner_key(previous)}>{owner_key(current)}",
    )
    return Observation(
        kind=KIND,
        victim=victim,
        intruder_key=owner_key(current),
        intruder={**_who(current), "previous_owner": _who(previous)},
        evidence=ev,
        summary=f"stamp taken over by pid {current.pid} ({current.lane}) from live pid "
        f"{previous.pid} ({previous.lane})",
    )
