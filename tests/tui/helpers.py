"""Waiting helpers for Pilot tests: a condition with a deadline, never a fixed sleep."""

from __future__ import annotations

import io
from collections.abc import Sequence

from rich.console import Console
from textual import events
from textual._time import get_time
from textual.keys import _character_to_key
from textual.pilot import Pilot

from lanewatch.tui.app import LanewatchApp
from lanewatch.tui.screens.confirm_dialog import ConfirmScreen
from lanewatch.tui.screens.typeahead_guard import BURST, TypeaheadGuard
from tests.conftest import until as until  # the one waiting helper, for Pilot tests

_KEY_CHARACTERS = {"enter": "\r", "tab": "\t", "escape": "\x1b", "space": " "}


def plain(renderable: object, width: int = 120) -> str:
    """A Rich renderable as the text a terminal of `width` columns would show, without colour."""
    out = io.StringIO()
    Console(file=out, width=width, color_system=None).print(renderable)
    return out.getvalue()


def screen_text(app: object) -> str:
    """Everything on the current screen as plain text (what a user would read)."""
    from textual.app import App

    assert isinstance(app, App)
    return "\n".join(strip.text for strip in app.screen._compositor.render_strips())


async def shows(pilot: Pilot[object], *texts: str, timeout: float = 15.0) -> str:
    """Wait until every one of `texts` is on screen; return the screen's text."""
    app = pilot.app
    await until(
        pilot,
        lambda: all(t in screen_text(app) for t in texts),
        timeout,
        what=f"{texts} on screen",
    )
    return screen_text(app)


async def cancelled(pilot: Pilot[object], label: str) -> None:
    """A dialog answered no: wait for its "<label> cancelled" notice, then prove no action
    started. The answer's callback does one or the other at once (`tui/shell/action_flows.py`
    `_confirm`, `confirm_export`), so this is the event to await instead of a fixed pause that
    proves nothing happened."""
    app = pilot.app
    notice = f"{label} cancelled"
    await until(
        pilot, lambda: any(n.message == notice for n in app.notices.notices), what=repr(notice)
    )
    started = [w for w in app.workers if w.group in ("actions", "export")]
    assert not started, "an action or an export was started"


def burst(pilot: Pilot[object], keys: Sequence[str]) -> None:
    """Send `keys` as a paste or `tmux send-keys` delivers them: every key event is queued
    before the app handles the first. (`Pilot.press` waits for the app to idle after each key,
    20 ms or more, so it cannot show what happens to type-ahead.) A key is a character or a
    Textual key name ("enter", "f9")."""
    app = pilot.app
    for key in keys:
        name = _character_to_key(key) if len(key) == 1 and not key.isalnum() else key
        event = events.Key(name, key if len(key) == 1 else _KEY_CHARACTERS.get(key))
        event.set_sender(app)
        app.post_message(event)


async def settle(pilot: Pilot[object], timeout: float = 15.0) -> None:
    """Wait until the active screen takes keys as commands again: its type-ahead guard (a
    short time after it appeared, changed view or moved the focus) has passed, and the next
    key is no part of a burst with the last one."""
    app = pilot.app
    assert isinstance(app, LanewatchApp)

    def settled() -> bool:
        screen = app.screen
        if isinstance(screen, TypeaheadGuard) and not screen.settled():
            return False
        return get_time() >= app.last_key_at + BURST

    await until(pilot, settled, timeout, what="the screen settled")


async def confirm_export(pilot: Pilot[object], key: str) -> None:
    """Press an export key (`e`, `E`) and answer its dialog yes, deliberately: once the dialog
    is on screen and settled (keys typed ahead of it never answer)."""
    app = pilot.app
    await pilot.press(key)
    await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="the export dialog")
    await settle(pilot)
    await pilot.press("y")
    await until(pilot, lambda: not isinstance(app.screen, ConfirmScreen), what="dialog closed")
