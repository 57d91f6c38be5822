"""The engine's changes on their way to the screen, and the watchdog over them: a drain as soon
as changes arrive (at most one per `DRAIN_GAP`), none while the view is paused or a dialog is
open, and once a second (`watch`) the check that the picture is current
(`shell/staleness.py`). Owned by the app.

Why at once and not once a frame: the engine already paces what it hands over (its process
delivers at most once a `DRAIN_GAP`, `engine/child.py`), and Textual paints at most once a frame
(its `MAX_FPS`) whatever the drains do. A drain held back to a frame of its own was a third
wait of up to a frame in series with those two: write → screen p99 61 ms against the floor's
19 ms (docs/performance.md, *The screen close to the model*). Two drains before one paint
cost the UI some CPU and no latency; `DRAIN_GAP` bounds that CPU when a source hands over
more often than the engine's process does (`dash --host`: every host's stream is paced on
its own, and they are merged)."""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from textual.screen import ModalScreen

from lanewatch.hosts.farviews import host_fixes
from lanewatch.tui.plumbing.call_after import call_after
from lanewatch.tui.plumbing.notifier import Notifier
from lanewatch.tui.screens.incident_screen import IncidentScreen
from lanewatch.tui.shell import staleness
from lanewatch.tui.shell.leaving import HUNG_UP, Leaving

if TYPE_CHECKING:
    from textual.screen import Screen

    from lanewatch.model.engine_api import EngineApi
    from lanewatch.tui.plumbing.change_buffer import ChangeBuffer
    from lanewatch.tui.screens.main_screen import MainScreen
    from lanewatch.tui.state.dashboard_state import DashboardState
    from lanewatch.tui.state.dashboard_store import Picture

log = logging.getLogger(__name__)

FRAME = 1 / 60  # Textual paints at most this often (its default MAX_FPS)
DRAIN_GAP = FRAME / 4  # the shortest time between two drains (a bound on the UI's CPU)


class FeedHost(Notifier, Protocol):
    """What the feed uses of the app that owns it (`LanewatchApp`)."""

    main: MainScreen
    picture: Picture
    buffer: ChangeBuffer
    engine: EngineApi
    state: DashboardState
    leaving: Leaving
    monotonic: Callable[[], float]

    @property
    def screen(self) -> Screen[Any]: ...

    def main_live(self) -> bool: ...

    def picture_loaded(self) -> None: ...

    def call_next(self, callback: Callable[..., Any], *args: Any, **kwargs: Any) -> None: ...


class PictureFeed:
    def __init__(self, app: FeedHost) -> None:
        self.app = app
        self._last_drain = 0.0
        self._drain_timer: asyncio.TimerHandle | None = None  # a drain is scheduled
        self._attribution_told = False
        self._fixes_told: set[str] = set()  # a half-migrated host's fix, told once (toast)
        self.watch_problem: staleness.Problem | None = None  # what the watchdog found, if any
        self._problem_at = 0.0
        self._ticked = app.monotonic()  # the first tick is late by how long the app took to start
        # Recent ticks with how late each came past its second.
        self._late: deque[tuple[float, float]] = deque(maxlen=staleness.LATE_KEPT)

    def pending(self) -> None:
        """The engine sent changes: drain now, or `DRAIN_GAP` after the last drain."""
        if self._drain_timer is not None:
            return
        delay = self._last_drain + DRAIN_GAP - self.app.monotonic()
        if delay <= 0:
            self.drain()
        else:
            # Not `set_timer`: a one-shot Textual timer whose delay has passed by the time its
            # task runs never fires (`plumbing/call_after.py`), and this handle would stay set
            # for good.
            self._drain_timer = call_after(self.app, delay, self._timed_drain)

    def cancel(self) -> None:
        if self._drain_timer is not None:
            self._drain_timer.cancel()
            self._drain_timer = None

    def _timed_drain(self) -> None:
        self._drain_timer = None
        self.drain()

    def drain(self) -> None:
        """Apply everything the engine sent since the last drain, unless the view is paused or
        a modal is open (the user is reading or confirming what is under it; the buffer keeps
        merging meanwhile, and the screen catches up when it closes)."""
        app = self.app
        main = app.main
        if not app.main_live():
            return  # not composed yet, or torn down at exit
        if main.paused or isinstance(app.screen, ModalScreen):
            main.chrome.update()
            return
        changes = app.buffer.take()
        self._last_drain = app.monotonic()
        if changes is None:
            return
        picture = app.picture
        was_loaded = picture.loaded  # once True, it stays so
        main.rows.apply(picture.apply(changes))
        if picture.loaded and not was_loaded:
            app.picture_loaded()
        if not self._attribution_told and picture.attribution == "inferred":
            # Once in the app's life (not once per picture or engine restart): how writers are
            # known, and how to know them exactly. The status line keeps saying the mode.
            self._attribution_told = True
            app.notify(
                picture.attribution_hint or "writers are inferred from open files and timing",
                title="attribution: inferred",
                markup=False,
                timeout=10,
            )
        self._tell_fixes()
        if isinstance(app.screen, IncidentScreen):
            app.screen.picture_changed()

    def _tell_fixes(self) -> None:
        """A host flagged as half-migrated (`hosts/flags.py`): its fix whole in a toast, once;
        the status line keeps saying it, as far as its one line reaches."""
        for name, words in host_fixes(self.app.picture.health):
            said = "\n".join(words)
            if said not in self._fixes_told:
                self._fixes_told.add(said)
                self.app.notify(
                    said, title=f"host {name}", severity="warning", markup=False, timeout=20
                )

    def _held(self) -> bool:
        """Changes are meant to wait: paused, a modal open, or no main screen to show them."""
        app = self.app
        return not app.main_live() or app.main.paused or isinstance(app.screen, ModalScreen)

    def watch(self, terminal: int | None) -> bool:
        """Once a second: is the picture current (`shell/staleness.py`)? Changes stuck in the
        buffer are drained at once; a silent engine process is restarted by `EngineProcess`.
        False: the terminal hung up (the app leaves as if SIGHUP had reached it)."""
        app = self.app
        now = app.monotonic()
        late, self._ticked = now - self._ticked, now  # over 1 s: the loop itself was busy
        # The time this tick came after its second: the loop was held up (starting, starved
        # of a CPU) and could not drain meanwhile.
        self._late.append((now, max(0.0, late - staleness.TICK)))
        waiting = app.buffer.waiting_for()
        held = waiting is None or self._held()
        # A stall is the time changes waited while the loop ran on time: the time they waited
        # for a held-up loop is not a wake-up lost (the wake-up is on its way: the loop had no
        # turn to run it). Drained, and said, only past STALL seconds of that.
        stalled = None
        if not held and waiting is not None:
            since = now - waiting
            stalled = max(0.0, waiting - sum(lost for t, lost in self._late if t > since))
        if stalled is not None and stalled > staleness.STALL:
            log.warning(
                "changes waited %.1f s without a drain, %.1f s of it with the loop on time "
                "(last tick %.1f s ago); draining",
                waiting,
                stalled,
                late,
            )
            self.cancel()
            self.drain()
        if terminal is not None and staleness.terminal_gone(terminal):
            app.leaving.leave(HUNG_UP, "the terminal hung up")  # as if SIGHUP had reached us
            return False
        quiet = app.engine.quiet_for()  # None but for an engine in a child process
        self._show_problem(staleness.judge(stalled_for=stalled, quiet_for=quiet))
        return True

    def _show_problem(self, problem: staleness.Problem | None) -> None:
        was = self.watch_problem
        if problem == was:
            return
        app = self.app
        now = app.monotonic()
        if was is None and problem is not None:
            self._problem_at = now - problem.age
            log.warning("the picture is not current: %s", problem.text)
        self.watch_problem = problem
        app.state.watchdog = problem.text if problem is not None else None
        if was is not None and (problem is None or problem.kind != was.kind):
            said = staleness.recovered(was, now - self._problem_at)
            log.warning("%s", said)
            app.notify(said, title="picture current again", markup=False, timeout=8)
            if problem is not None:
                self._problem_at = now - problem.age
        if app.main_live():
            app.main.chrome.update()
