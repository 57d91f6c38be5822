"""The dashboard cannot go quiet without saying so.

A drain scheduled for "now" is never lost; when changes do wait too long anyway (a wake-up lost
some other way) the watchdog drains them and says so; a stopped engine process (SIGSTOP, a real
signal to the real child) shows as degraded within seconds and recovers by itself after SIGCONT;
one silent for longer is killed and started again.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from textual.message import Message
from textual.notifications import Notify

from lanewatch.engine.process import EngineProcess
from lanewatch.model.views import Changes, NsState
from lanewatch.tui.app import LanewatchApp, make_app
from lanewatch.tui.plumbing.messages import CatchUp, ChangesPending
from lanewatch.tui.shell import staleness
from lanewatch.tui.shell.picture_feed import DRAIN_GAP
from lanewatch.tui.state.dashboard_store import View
from lanewatch.tui.widgets.status_line import StatusLine

from .conftest import Lanes
from .fakes import NOW, FakeEngine, ns_view
from .helpers import screen_text, until


class SteppedClock:
    """The app's monotonic clock, moved only by the test: it decides how much of a frame is left
    when a batch arrives (the real one cannot be made to land a nanosecond before a deadline)."""

    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


def status(app: LanewatchApp) -> StatusLine:
    return app.main.query_one(StatusLine)


class Said:
    """Every notification the app gives (a `message_hook`: toasts wrap and fade on screen)."""

    def __init__(self, app: LanewatchApp | None = None) -> None:
        self.texts: list[str] = []
        self.app = app

    def __call__(self, message: Message) -> None:
        if isinstance(message, Notify):
            self.texts.append(message.notification.message)

    def has(self, text: str) -> bool:
        # A toast is one line; the app's message log has each notice whole.
        whole = [n.message for n in self.app.notices.notices] if self.app is not None else []
        return any(text in said for said in [*self.texts, *whole])


async def test_a_drain_due_a_nanosecond_later_is_not_lost() -> None:
    """The lost wake-up behind the frozen dashboards. A batch arriving just before the gap's end
    armed a one-shot `set_timer` for the rest of the drain gap (here 1 ns); Textual skips a one-shot
    whose deadline passed before its task first looked at the clock, so the drain never ran, the
    "drain armed" flag stayed set, every later wake-up was ignored, and the buffer never woke the
    UI again (it only does when going from empty to non-empty). Under load (the reader thread
    holding the interpreter lock, 2 busy cores) the same happens with delays of milliseconds.
    Before the fix this failed in 3 runs of 3 (lane c never reached the screen; lane b can be
    rescued by the main screen's first resume, which also drains). The wait is shorter than the
    watchdog's STALL, so the watchdog cannot be what passes it."""
    clock = SteppedClock()
    engine = FakeEngine([ns_view("a")])
    app = LanewatchApp(engine, root_paths=["/roots/r1"], clock=lambda: NOW, monotonic=clock)
    async with app.run_test(size=(120, 30)) as pilot:
        await until(pilot, lambda: app.main.table().has_row("/roots/r1/a"), what="first batch")
        for name in ("b", "c", "d"):  # and again: nothing stays armed after a timed drain
            clock.now += DRAIN_GAP - 1e-9  # the last drain was at the previous `now`
            view = ns_view(name)
            engine.push(Changes(upserts={view.key: view}, at=NOW))
            await until(
                pilot,
                lambda key=view.key: app.main.table().has_row(key),
                timeout=staleness.STALL - 1.0,
                what=f"lane {name} drained within the frame",
            )
        assert app.feed.watch_problem is None


async def test_changes_stuck_without_a_wakeup_are_drained_and_said() -> None:
    """A wake-up lost some other way (here the message itself is refused: Textual's public
    `disable_messages`): the watchdog finds changes waiting over STALL seconds, not paused, no
    modal, drains them, shows it as degraded in the status line, then says it caught up."""
    engine = FakeEngine([ns_view("a")])
    app = make_app([Path("/roots/r1")], engine=engine, clock=lambda: NOW)
    said = Said(app)
    async with app.run_test(size=(160, 30), message_hook=said) as pilot:
        await until(pilot, lambda: app.main.table().has_row("/roots/r1/a"))
        # The status line is degraded from the tick that finds the stall to the next one (a
        # second): a spy (the real method still runs) reads it as each problem is shown, where
        # a test starved of its turns on a loaded machine would sample after the next tick.
        shown: list[tuple[str, bool, str]] = []
        show = app.feed._show_problem

        def spy(problem: staleness.Problem | None) -> None:
            show(problem)
            if problem is not None:
                line = status(app)
                shown.append((problem.kind, line.has_class("-degraded"), line.state.watchdog or ""))

        app.feed._show_problem = spy  # type: ignore[method-assign]
        # The only other drain: the main screen's catch-up, which its first resume asks for;
        # under load that can come after the push below, and then no stall is ever seen (1 run
        # in 20 of a hunt). Refused too, the watchdog is the one way left.
        app.disable_messages(ChangesPending, CatchUp)
        late = ns_view("late")
        engine.push(Changes(upserts={late.key: late}, at=NOW))
        assert not app.main.table().has_row(late.key)
        await until(pilot, lambda: bool(shown), timeout=staleness.STALL + 30, what="a problem")
        kind, degraded, said_there = shown[0]
        assert kind == "stall" and degraded, shown
        assert "without reaching the screen" in said_there
        await until(pilot, lambda: app.main.table().has_row(late.key), what="drained by the watch")
        await until(pilot, lambda: app.feed.watch_problem is None, what="recovered")
        await until(pilot, lambda: said.has("caught up by itself"), what="said it recovered")
        assert not status(app).has_class("-degraded")


async def test_the_time_a_held_up_loop_made_changes_wait_is_no_stall() -> None:
    """The UI's loop held up (starting, or starved of a CPU on a loaded machine) cannot drain:
    the time changes waited for it is not a lost wake-up, and the first tick after it claims
    none (a snapshot taken under load caught "changes waited 3s without reaching the screen"
    and "a lost wake-up"). Here the wake-up is refused as well (only the watchdog drains), so
    once the loop has run on time for STALL seconds the stall is real: drained and said.
    Before the fix the first tick after the hold claimed the stall."""
    engine = FakeEngine([ns_view("a")])
    app = make_app([Path("/roots/r1")], engine=engine, clock=lambda: NOW)
    async with app.run_test(size=(160, 30)) as pilot:
        await until(pilot, lambda: app.main.table().has_row("/roots/r1/a"))
        after: list[tuple[float, bool]] = []  # each watch since the hold: (waited, a problem)
        watch = app.feed.watch
        holding = [True]

        def spy(terminal: int | None) -> bool:
            going = watch(terminal)
            if not holding[0]:
                after.append((app.buffer.waiting_for() or 0.0, app.feed.watch_problem is not None))
            return going

        app.feed.watch = spy  # type: ignore[method-assign]
        app.disable_messages(ChangesPending, CatchUp)  # only the watch drains
        late = ns_view("late")
        engine.push(Changes(upserts={late.key: late}, at=NOW))
        # Hold the loop up (this test runs on it) until the change has waited past STALL: the
        # loop's ticks stop meanwhile, as they do when the process gets no CPU.
        while (app.buffer.waiting_for() or 0.0) <= staleness.STALL + 0.5:
            time.sleep(0.01)
        holding[0] = False
        await until(pilot, lambda: bool(after), what="a tick after the hold")
        waited, claimed = after[0]
        assert waited > staleness.STALL and not claimed, after
        await until(pilot, lambda: app.main.table().has_row(late.key), what="drained by the watch")
        assert any(said for _, said in after), after  # the wake-up was lost too: said


async def test_paused_changes_are_not_a_stall() -> None:
    """Held on purpose (paused): never flagged, never drained behind the user's back."""
    engine = FakeEngine([ns_view("a")])
    app = make_app([Path("/roots/r1")], engine=engine, clock=lambda: NOW)
    async with app.run_test(size=(160, 30)) as pilot:
        await until(pilot, lambda: app.main.table().has_row("/roots/r1/a"))
        await pilot.press("p")
        held = ns_view("held")
        engine.push(Changes(upserts={held.key: held}, at=NOW))
        await until(
            pilot,
            lambda: (app.buffer.waiting_for() or 0.0) > staleness.STALL + 1.5,
            timeout=staleness.STALL + 10,
            what="changes held past the stall limit and a tick",
        )
        assert app.feed.watch_problem is None
        assert not app.main.table().has_row(held.key)
        await pilot.press("p")
        await until(pilot, lambda: app.main.table().has_row(held.key), what="applied on resume")


def _cont(engine: EngineProcess, pid: int) -> None:
    """Resume the child, if it is still our unreaped child (never a reused pid)."""
    if engine.pid == pid:
        os.kill(pid, signal.SIGCONT)


async def test_a_stopped_engine_process_shows_degraded_then_recovers(
    lanes: Lanes, scratch: Path
) -> None:
    """SIGSTOP the real engine child: within QUIET seconds and a tick the status line says the
    engine has sent nothing; a lane started meanwhile is not shown; after SIGCONT the child's
    keep-alive and the lane arrive, the degraded sign goes and the dashboard says so."""
    app = make_app([scratch])
    assert isinstance(app.engine, EngineProcess)
    said = Said(app)
    async with app.run_test(size=(200, 30), message_hook=said) as pilot:
        await until(pilot, app.engine.first_picture.is_set, what="the child's picture")
        pid = app.engine.pid
        assert pid is not None
        os.kill(pid, signal.SIGSTOP)
        try:
            await until(
                pilot,
                lambda: status(app).has_class("-degraded"),
                timeout=staleness.QUIET + 5,
                what="degraded after the engine went silent",
            )
            assert app.feed.watch_problem is not None and app.feed.watch_problem.kind == "quiet"
            assert "degraded: the engine process has sent nothing" in screen_text(app)
            lane = lanes.start("while-stopped")
            assert lane.key not in app.picture.namespaces  # the child cannot have seen it
        finally:
            _cont(app.engine, pid)
        await until(pilot, lambda: app.feed.watch_problem is None, what="recovered after SIGCONT")
        await until(pilot, lambda: said.has("is sending again"), what="said it recovered")
        await until(
            pilot,
            lambda: app.main.table(View.LANES).has_row(lane.key),
            what="the lane started while stopped",
        )
        assert app.engine.pid == pid  # recovered, not restarted
        assert app.picture.namespaces[lane.key].state is NsState.LIVE


async def test_an_engine_process_silent_too_long_is_restarted(scratch: Path) -> None:
    """Past `silence_restart` seconds of silence the child is killed (our own unreaped child)
    and a new one started: the roots are degraded with the reason meanwhile, then current."""
    app = make_app([scratch])
    engine = app.engine
    assert isinstance(engine, EngineProcess)
    engine.silence_restart = staleness.QUIET + 2
    async with app.run_test(size=(200, 30)) as pilot:
        await until(pilot, engine.first_picture.is_set, what="the child's picture")
        pid = engine.pid
        assert pid is not None
        os.kill(pid, signal.SIGSTOP)
        try:
            await until(
                pilot,
                lambda: any("sent nothing for" in h.detail for h in app.picture.health),
                timeout=engine.silence_restart + 10,
                what="roots degraded with the reason",
            )
        finally:
            _cont(engine, pid)  # if the kill has not landed
        await until(
            pilot,
            lambda: engine.pid not in (None, pid) and app.feed.watch_problem is None,
            timeout=30,
            what="a new engine process, sending",
        )
        await until(
            pilot,
            lambda: all(h.status == "ok" for h in app.picture.health),
            timeout=30,
            what="roots ok again",
        )
        assert engine.restarts == 1
