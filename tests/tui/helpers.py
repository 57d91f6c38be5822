"""Waiting helpers for Pilot tests: a condition with a deadline, never a fixed sleep."""

from __future__ import annotations

import time
from collections.abc import Callable

from textual.pilot import Pilot


async def until(
    pilot: Pilot[object], condition: Callable[[], object], timeout: float = 15.0, what: str = ""
) -> None:
    """Let the app run until `condition()` is truthy; fail after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout}s: {what or condition}")
        await pilot.pause(0.02)


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
