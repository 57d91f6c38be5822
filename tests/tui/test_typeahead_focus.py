"""The type-ahead guard dates a focus move by when the focus moved, not by when the news of it
(`DescendantFocus`, a few message hops later) reached the screen: under load those hops took
longer than `GUARD`, and a `y` typed once the dialog was on screen and settled was refused.
A real move (tab to the other button) still re-arms it. A stand-in engine: only the
dialog's timing is under test; tests/tui/test_typeahead.py covers the journeys on real lanes."""

from __future__ import annotations

from pathlib import Path

from rich.text import Text
from textual import events
from textual.widgets import Button

from lanewatch.tui.app import make_app
from lanewatch.tui.screens.confirm_dialog import ConfirmScreen

from .fakes import NOW, FakeEngine
from .helpers import settle, until


async def open_dialog(pilot, app, answers: list[bool | None]) -> ConfirmScreen:  # type: ignore[no-untyped-def]
    app.push_screen(ConfirmScreen("Do it?", [Text("x")], "It does it.", "Do"), answers.append)
    await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="the dialog")
    dialog = app.screen
    assert isinstance(dialog, ConfirmScreen)
    await until(pilot, lambda: getattr(dialog.focused, "id", None) == "confirm-no", what="focus")
    await settle(pilot)
    return dialog


async def test_news_of_a_focus_that_arrives_late_does_not_refuse_a_settled_yes() -> None:
    app = make_app([Path("/roots/r1")], engine=FakeEngine([], ()), clock=lambda: NOW)
    answers: list[bool | None] = []
    async with app.run_test(size=(100, 30)) as pilot:
        dialog = await open_dialog(pilot, app, answers)
        # The dialog's first focus, its news delivered as late as a starved loop delivers it.
        late = events.DescendantFocus(dialog.query_one("#confirm-no", Button))
        late.set_sender(dialog)
        dialog.post_message(late)
        await pilot.pause()
        await pilot.press("y")
        await until(pilot, lambda: answers == [True], what="y answered the dialog")
        assert dialog.ignored is None


async def test_a_real_focus_move_still_refuses_the_key_typed_with_it() -> None:
    app = make_app([Path("/roots/r1")], engine=FakeEngine([], ()), clock=lambda: NOW)
    answers: list[bool | None] = []
    async with app.run_test(size=(100, 30)) as pilot:
        dialog = await open_dialog(pilot, app, answers)
        dialog.set_focus(dialog.query_one("#confirm-yes", Button))  # as tab does
        await pilot.press("y")
        await until(pilot, lambda: dialog.ignored == "y", what="y refused")
        assert app.screen is dialog and not answers
        await settle(pilot)
        await pilot.press("y")
        await until(pilot, lambda: answers == [True], what="a settled y answers")
