"""The header line: the three views a key apart, each with its count, and the current one lit."""

from __future__ import annotations

from rich.text import Text
from textual.events import Click
from textual.widgets import Static

from lanewatch.tui.plumbing.messages import ViewPicked
from lanewatch.tui.state.dashboard_store import VIEW_TITLES, View

KEYS = {View.LANES: "1", View.COLLISIONS: "2", View.STALE: "3"}


class ViewBar(Static):
    """`lanewatch │ 1 Lanes 4 │ 2 Collisions 1 │ 3 Stale 3 of 7`; a click switches view.
    A view whose filter hides rows says how many it shows of how many."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__("", id=id, markup=False)
        self._current = View.LANES
        self._counts: dict[View, int] = dict.fromkeys(View, 0)
        self._shown: dict[View, int] = {}
        self._spans: list[tuple[int, int, View]] = []
        self._render_bar()

    def show(
        self, current: View, counts: dict[View, int], shown: dict[View, int] | None = None
    ) -> None:
        """`shown`: rows a filter lets through, for the views that have one."""
        shown = dict(shown or {})
        if (current, counts, shown) != (self._current, self._counts, self._shown):
            self._current, self._counts, self._shown = current, dict(counts), shown
            self._render_bar()

    def _render_bar(self) -> None:
        text = Text(" lanewatch ", style="bold", no_wrap=True, end="")
        self._spans = []
        for view in View:
            text.append("│")
            count = self._counts[view]
            alert = view is View.COLLISIONS and count > 0
            style = "bold reverse" if view is self._current else ""
            start = len(text)
            text.append(f" {KEYS[view]} ", style=style or "dim")
            text.append(VIEW_TITLES[view], style=style)
            text.append(" ", style=style)
            if view in self._shown:
                text.append(f"{self._shown[view]} of ", style=style)
            text.append(str(count), style=(style + " red" if alert else style) or "bold")
            text.append(" ", style=style)
            self._spans.append((start, len(text), view))
        self.update(text)

    def on_click(self, event: Click) -> None:
        for start, end, view in self._spans:
            if start <= event.x < end:
                self.post_message(ViewPicked(view))
                return
