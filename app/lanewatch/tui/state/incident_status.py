"""An incident's state in words, the same in its row, its detail pane and its timeline: open,
acknowledged (by whom, when), reopened (by which write since the acknowledgement) or resolved
(by lanewatch: every writer gone and quiet). Pure."""

from __future__ import annotations

from lanewatch.inert import inert
from lanewatch.model.views import Incident
from lanewatch.tui.state import humanize


def incident_state(incident: Incident) -> str:
    """ "resolved", "acknowledged", "reopened", or "" (open, never acknowledged)."""
    return incident.ack_state


def reopened_by(incident: Incident) -> str:
    """What reopened an incident: the first write seen after its acknowledgement ("" if it
    was not reopened, or the evidence kept does not reach back)."""
    if not incident.reopened or incident.acknowledged:
        return ""
    after = [e for e in incident.evidence if incident.ack_at is None or e.time > incident.ack_at]
    if not after:
        return ""
    first = min(after, key=lambda e: e.time)
    return inert(f"{first.writer or 'a writer'} wrote {first.path} at {humanize.clock(first.time)}")


def state_line(incident: Incident) -> str:
    """One line for the timeline's summary and the detail pane; "" for an open incident never
    acknowledged."""
    state = incident_state(incident)
    if not state:
        return ""
    when = humanize.stamp_time(incident.ack_at) if incident.ack_at is not None else ""
    if state == "resolved":
        why = f": {incident.ack_note}" if incident.ack_note else ""
        return inert(f"resolved by lanewatch {when}{why}")
    if state == "acknowledged":
        by = f" by {incident.ack_by}" if incident.ack_by else ""
        return inert(f"acknowledged{by} {when}".rstrip())
    what = reopened_by(incident)
    said = f"reopened: acknowledged {when}".rstrip()
    return inert(f"{said}, then {what}" if what else f"{said}, written again since")
