"""What the main screen's keys act on: the marked rows of the shown view, else the cursor row,
as the picture holds them now (frozen views: what the user saw when they pressed the key)."""

from __future__ import annotations

from collections.abc import Callable

from lanewatch.model.views import Incident, NamespaceView
from lanewatch.tui.backend.actions_adapter import can_clear, can_kill, target_label, why_not_kill
from lanewatch.tui.state.culprit import intruder_lane
from lanewatch.tui.state.dashboard_store import Picture, Row, View
from lanewatch.tui.widgets.lane_table import LaneTable


class Selection:
    """Rows picked on the shown table. Built with the picture and two getters of the screen's:
    the shown view's table and the shown view (both change as the user switches views)."""

    def __init__(
        self, picture: Picture, table: Callable[[], LaneTable], view: Callable[[], View]
    ) -> None:
        self.picture = picture
        self.table = table
        self.view = view

    def row(self) -> Row | None:
        """The cursor row."""
        key = self.table().cursor_key
        return None if key is None else self.picture.row(self.view(), str(key))

    def targets(self) -> list[Row]:
        """The marked rows of this view (as shown now), else the cursor row."""
        table = self.table()
        marked = table.marked
        if marked:
            keys = [k for k in table.visible_keys if k in marked]
        else:
            keys = [] if table.cursor_key is None else [table.cursor_key]
        view = self.view()
        rows = (self.picture.row(view, str(k)) for k in keys)
        return [row for row in rows if row is not None]

    def namespaces(self) -> list[NamespaceView]:
        return [row for row in self.targets() if isinstance(row, NamespaceView)]

    def incidents(self) -> list[Incident]:
        return [row for row in self.targets() if isinstance(row, Incident)]

    def killable(self) -> list[NamespaceView]:
        return [ns for ns in self.namespaces() if can_kill(ns)]

    def clearable(self) -> list[NamespaceView]:
        return [ns for ns in self.namespaces() if can_clear(ns)]

    def unacknowledged(self) -> list[Incident]:
        return [i for i in self.incidents() if not i.acknowledged]

    def intruder(self) -> NamespaceView | None:
        """The lane that intruded in the cursor's incident (Collisions), if watched here."""
        row = self.row()
        return intruder_lane(self.picture.namespaces, row) if isinstance(row, Incident) else None

    def why_not(self, action: str) -> str:
        """Why `action` does nothing on the selection now, for a short notice."""
        rows = self.targets()
        if not rows:
            return "No row is selected."
        row = rows[0]
        if action == "kill" and isinstance(row, NamespaceView):
            return why_not_kill(row) + "."
        if action == "kill" and isinstance(row, Incident):
            if row.victim is None:
                return "A shared file has no intruder: its writers are in Lanes (1), marked ~."
            ns = self.intruder()
            if ns is None:
                return "The intruding lane is not watched here (or two lanes match its name)."
            return why_not_kill(ns) + "."
        if action == "clear" and isinstance(row, NamespaceView):
            return (
                f"{target_label(row)} is {row.state.value}: only stale, orphan or released "
                "namespaces are cleared."
            )
        if action == "acknowledge":
            return "Already acknowledged."
        if action in ("open", "export"):
            return "No incident here: this lane was not hurt by one."
        return ""

    def incident(self) -> Incident | None:
        """The cursor's incident, or the latest incident of the cursor's namespace."""
        row = self.row()
        if isinstance(row, Incident):
            return row
        if isinstance(row, NamespaceView):
            incidents = self.picture.incidents_of(row.key)
            return incidents[-1] if incidents else None
        return None
