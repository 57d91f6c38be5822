"""The main screen's keys, as a table (`MainScreen.BINDINGS`), and the order of its views.
Their actions are `MainScreen.action_*`; `MainScreen.check_action` greys what does not apply."""

from __future__ import annotations

from textual.binding import Binding, BindingType

from lanewatch.tui.state.dashboard_store import View

ORDER = (View.LANES, View.COLLISIONS, View.STALE)


KEYS: list[BindingType] = [
    Binding("question_mark,f1", "ask('help')", "Help"),
    Binding("1", "view('lanes')", "Lanes", show=False),
    Binding("2", "view('collisions')", "Collisions", show=False),
    Binding("3", "view('stale')", "Stale", show=False),
    Binding("tab", "view(1)", "Next view"),
    Binding("shift+tab", "view(-1)", "Previous view", show=False),
    # A priority binding runs when the app dequeues the key, before it forwards the keys behind
    # it: they reach the filter, however fast they come (see `screens/typeahead_guard.py`).
    Binding("slash", "filter", "Filter", priority=True),
    Binding("escape", "escape", "Clear filter / marks", show=False),
    Binding("k,f9", "kill", "Kill"),  # in Collisions: the row's intruding lane
    Binding("c,f8", "clear", "Clear"),
    Binding("a", "acknowledge", "Acknowledge"),
    Binding("enter", "open", "Timeline", show=False),
    Binding("e", "export('md')", "Export incident .md", show=False),
    Binding("E", "export('json')", "Export incident .json", show=False),
    Binding("t", "ask('trash')", "Trash / restore", show=False),
    Binding("l", "files", "Files of the lane", show=False),
    Binding("y", "copy_path", "Copy path", show=False),
    Binding("o", "forward_port", "Reach a port (forward)", show=False),
    Binding("backspace", "back", "Back to incident", show=False),
    Binding("greater_than_sign,f6", "sort(1)", "Sort next column", show=False),
    Binding("less_than_sign", "sort(-1)", "Sort previous column", show=False),
    Binding("I", "invert_sort", "Invert sort", show=False),
    # One key, two bindings: the footer shows the one `check_action` enables (its label).
    Binding("f", "follow(True)", "Follow"),
    Binding("f", "follow(False)", "Unfollow"),
    Binding("p,Z", "pause(True)", "Pause"),
    Binding("p,Z", "pause(False)", "Resume"),
    Binding("U", "unmark", "Unmark all", show=False),
    Binding("d", "detail('toggle')", "Detail pane", show=False),
    Binding("C", "columns", "Hide / show columns", show=False),
    Binding("left_square_bracket", "detail('up')", "Scroll detail up", show=False),
    Binding("right_square_bracket", "detail('down')", "Scroll detail down", show=False),
    Binding("ctrl+r", "ask('rescan')", "Rescan roots", show=False),
]
